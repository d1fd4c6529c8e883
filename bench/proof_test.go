//go:build e2e

package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The bulk writer's stored hashes are tlog's, in tlog's order, and its
// root is tlog's tree hash, at every size up to 1,100.
func TestLogBuilderIsTlog(t *testing.T) {
	var b logBuilder
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := range int64(1100) {
		leaf := logLeafHash(i, LogEventID(i))
		want, err := tlog.StoredHashesForRecordHash(i, leaf, r)
		if err != nil {
			t.Fatal(err)
		}
		var got []tlog.Hash
		b.add(leaf, func(idx int64, h tlog.Hash) {
			if idx != int64(len(stored))+int64(len(got)) {
				t.Fatalf("leaf %d: hash at %d, want %d", i, idx, int64(len(stored))+int64(len(got)))
			}
			got = append(got, h)
		})
		if len(got) != len(want) {
			t.Fatalf("leaf %d: %d hashes, want %d", i, len(got), len(want))
		}
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("leaf %d: hash %d differs", i, j)
			}
		}
		stored = append(stored, got...)
		root, err := tlog.TreeHash(i+1, r)
		if err != nil || b.root() != root {
			t.Fatalf("root of %d leaves: %v", i+1, err)
		}
	}
}

// A log written in bulk is a log of the store: its head, leaf indexes and
// tree hash are what the store's own appends would give; and the
// benchmark runs end to end on a small log (every proof checked).
func TestProofBenchmarkRuns(t *testing.T) {
	ctx := context.Background()
	t.Run("WriteLog", func(t *testing.T) { checkWriteLog(ctx, t) })
	var out bytes.Buffer
	r, err := Proof(ctx, 2_000, 30, &out)
	if err != nil {
		t.Fatal(err)
	}
	figs := r.Figures()
	if len(figs) != 3 || figs[0].Value <= 0 || figs[0].Reference <= 0 || figs[0].Max != ProofGoalMS || figs[1].Value <= 0 || r.Build <= 0 {
		t.Fatalf("%+v %+v", r, figs)
	}
	if !strings.Contains(out.String(), "measuring 30 proofs") || !strings.Contains(out.String(), "measuring 30 hash tiles") {
		t.Fatalf("output: %s", out.String())
	}
}

func checkWriteLog(ctx context.Context, t *testing.T) {
	env, err := startCHEnv(ctx, "bench_proof_test")
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	org := uuid.New()
	const n = 3000
	root, err := WriteLog(ctx, env.raw, org, auditstore.LogAudit, n, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	size, last, err := env.store.LogHead(ctx, org, auditstore.LogAudit)
	if err != nil || size != n || last.EventID != LogEventID(n-1) {
		t.Fatalf("head %d %v %v", size, last, err)
	}
	if got, err := tlog.TreeHash(n, auditstore.LogHashReader(ctx, env.store, org, auditstore.LogAudit)); err != nil || got != root {
		t.Fatalf("the store's tree hash differs: %v", err)
	}
	m, err := env.store.LeafIndexes(ctx, org, auditstore.LogAudit, []uuid.UUID{LogEventID(0), LogEventID(n - 1)})
	if err != nil || m[LogEventID(0)] != 0 || m[LogEventID(n-1)] != n-1 {
		t.Fatalf("leaf indexes %v %v", m, err)
	}
}
