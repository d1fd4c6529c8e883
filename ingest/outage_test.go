package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// unwellStore fails its first writes with err while still answering Ping,
// as a store with a full disk or a flaky network does, then writes.
type unwellStore struct {
	ingest.AuditWriter
	err      error
	failures atomic.Int64
}

func (s *unwellStore) WriteAudit(ctx context.Context, events []schemas.AuditEvent) error {
	if s.failures.Add(-1) >= 0 {
		return s.err
	}
	return s.AuditWriter.WriteAudit(ctx, events)
}

// A store that fails writes for a reason that is not a property of the rows
// — a full disk (SQLITE_FULL, ClickHouse 243), an I/O error, a network
// error (209, 210), a cancelled query (394), anything unclassified — while
// it still answers Ping is an outage: the batch waits and is written once
// the store is well, nothing is dead-lettered.
func TestStoreFailuresThatAreNotRefusalsWait(t *testing.T) {
	errs := map[string]error{
		"sqlite full":          fmt.Errorf("sqlite insert: %w", errors.New("database or disk is full (13)")),
		"sqlite io":            fmt.Errorf("sqlite commit: %w", errors.New("disk I/O error (10)")),
		"clickhouse no space":  fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 243, Name: "DB::Exception", Message: "Cannot reserve 1.00 MiB, not enough space"}),
		"clickhouse network":   fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 210, Name: "DB::NetException", Message: "Connection refused"}),
		"clickhouse timeout":   fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 209, Name: "DB::NetException", Message: "Timeout exceeded while reading from socket"}),
		"clickhouse cancelled": fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 394, Name: "DB::Exception", Message: "Query was cancelled"}),
		"unclassified":         errors.New("something nobody classified"),
	}
	for name, werr := range errs {
		t.Run(name, func(t *testing.T) {
			store := &unwellStore{AuditWriter: backends()[0].open(t), err: werr}
			store.failures.Store(6) // more than any "tries before the DLQ" would allow
			_, nc, js := testenv.NATS(t)
			cfg := testConfig()
			cfg.FlushInterval = 300 * time.Millisecond
			org := uuid.New()
			evs := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now().Add(-time.Millisecond)), event(org, time.Now().Add(-2*time.Millisecond))}
			publish(t, newPublisher(t, nc), evs)
			in, _ := runIngester(t, nc, store, cfg)
			testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
			testenv.Eventually(t, 30*time.Second, "the batch committed", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0 && in.Stats().Stored >= uint64(len(evs))
			})
			checkExactlyOnce(t, store.AuditWriter.(auditstore.Store), org, evs)
			if n := len(dlqMessages(t, js)); n != 0 {
				t.Fatalf("%d valid events dead-lettered while the store was unwell", n)
			}
			if st := in.Stats(); st.DeadLettered != 0 || st.Refused != 0 || st.Retries < 6 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
