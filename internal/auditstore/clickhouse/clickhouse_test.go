package clickhouse_test

import (
	"context"
	"testing"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := testenv.ClickHouse(t)
		return func(t *testing.T) auditstore.Store {
			s, err := clickhouse.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
