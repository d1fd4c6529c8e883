package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
)

func openCluster(t *testing.T, dsn string) *clickhouse.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := clickhouse.OpenWith(ctx, dsn, clickhouse.Options{Cluster: testenv.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The whole conformance suite passes against a 2×2 cluster (about 4
// minutes here): listings, pagination, filters, isolation, dedup,
// executions, search, stats and feeds, through the Distributed tables.
func TestClusterConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		_, dsn := testenv.ClickHouseCluster(t)
		return func(t *testing.T) auditstore.Store { return openCluster(t, dsn) }
	})
}

func TestClusterOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"", true}, {"auditrail", true}, {"prod_2x2", true}, {"a-b", false}, {"x` ON CLUSTER y", false}, {"1abc", false}} {
		if err := (clickhouse.Options{Cluster: tc.name}).Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v", tc.name, err)
		}
	}
}
