package checkpointer

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/tlog"
)

// A checkpoint signs the sequencer's seal read at the start of its round
// as its sealed_until line; a seal later than the checkpoint's time is
// the checkpoint's time; without a seal the line is absent.
func TestCheckpointSealedUntil(t *testing.T) {
	f := newFixture(t)
	c := f.checkpointer(t, "a", nil)
	ctx := context.Background()
	org := uuid.New()
	m := storetest.NewLogModel()
	latest := func() tlog.Checkpoint {
		t.Helper()
		cp, ok, err := f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit)
		if err != nil || !ok {
			t.Fatalf("no checkpoint: %v", err)
		}
		got, _, err := tlog.Open(cp.Note, f.keySet(t, c))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	f.grow(t, org, auditstore.LogAudit, m, 3)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := latest(); !got.SealedUntil.IsZero() {
		t.Fatalf("sealed_until %s without a seal", got.SealedUntil)
	}
	for _, tc := range []struct {
		name   string
		seal   time.Time
		expect func(at time.Time) time.Time
	}{
		{"the seal", f.clk.now().Add(-time.Minute), nil},
		{"a seal after the checkpoint", f.clk.now().Add(time.Hour), func(at time.Time) time.Time { return at }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(sequencer.Sealed{Seq: 9, Time: tc.seal})
			if _, err := f.kv.Put(ctx, sequencer.SealedKey, b); err != nil {
				t.Fatal(err)
			}
			f.grow(t, org, auditstore.LogAudit, m, 2)
			f.clk.add(time.Second)
			if err := c.Round(ctx); err != nil {
				t.Fatal(err)
			}
			got := latest()
			want := tc.seal
			if tc.expect != nil {
				want = tc.expect(got.Time)
			}
			if want = want.Truncate(time.Millisecond); !got.SealedUntil.Equal(want) {
				t.Fatalf("sealed_until %s, want %s", got.SealedUntil, want)
			}
		})
	}
}
