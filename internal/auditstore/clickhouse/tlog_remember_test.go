package clickhouse_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
)

// A store reads what crashed appends left above the heads only for the
// logs it did not leave at their size itself: a round of appends to logs
// that this store appended last reads nothing above them; a log another
// writer appended to (its head moved) is read again, alone; after
// ForgetLogWrites (a sequencer taking the lease) every log is read again.
// Every log stays the model's throughout.
func TestAppendLogsRemembersItsOwnWrites(t *testing.T) {
	s, dsn := openStore(t)
	ctx := context.Background()
	other, err := clickhouse.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	const logs = 3
	orgs := make([]uuid.UUID, logs)
	models := make([]*storetest.LogModel, logs)
	for i := range orgs {
		orgs[i], models[i] = uuid.New(), storetest.NewLogModel()
	}
	appendAll := func(st *clickhouse.Store, which ...int) {
		t.Helper()
		var as []auditstore.LogAppend
		for _, i := range which {
			leaves, hashes := models[i].Add(t, 4)
			as = append(as, auditstore.LogAppend{Org: orgs[i], Kind: auditstore.LogAudit, Leaves: leaves, Hashes: hashes})
		}
		if err := st.AppendLogs(ctx, as); err != nil {
			t.Fatal(err)
		}
		for i, org := range orgs {
			n := int64(len(models[i].Leaves))
			if size, _, err := s.LogHead(ctx, org, auditstore.LogAudit); err != nil || size != n {
				t.Fatalf("log %d: head %d, %v; want %d", i, size, err, n)
			}
			if got, err := tlog.TreeHash(n, auditstore.LogHashReader(ctx, s, org, auditstore.LogAudit)); err != nil || got != models[i].Root(t, n) {
				t.Fatalf("log %d: tree hash at %d: %v", i, n, err)
			}
		}
	}
	reads := func(want int64) {
		t.Helper()
		if got := clickhouse.RemnantReads(s); got != want {
			t.Fatalf("%d reads of the rows above the heads, want %d", got, want)
		}
	}

	appendAll(s, 0, 1, 2)
	reads(2) // new logs: leaves and tiles above their heads, one query each
	appendAll(s, 0, 1, 2)
	appendAll(s, 0, 1, 2)
	reads(2) // left at their sizes by s itself: not read
	appendAll(other, 1)
	appendAll(s, 0, 1, 2)
	reads(4) // log 1 moved behind s's back: read again
	appendAll(s, 0, 1, 2)
	reads(4)
	s.ForgetLogWrites()
	appendAll(s, 0, 1, 2)
	reads(6)
	appendAll(s, 0, 2)
	reads(6)
}
