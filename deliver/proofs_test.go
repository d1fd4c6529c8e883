package deliver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// memLogs is one organization's audit log in memory (Logs).
type memLogs struct {
	org    uuid.UUID
	hashes []sumtlog.Hash
	size   int64
	leaf   map[uuid.UUID]int64
	cp     auditstore.Checkpoint
}

func (m *memLogs) ReadHashes(ix []int64) ([]sumtlog.Hash, error) {
	out := make([]sumtlog.Hash, len(ix))
	for i, x := range ix {
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memLogs) LeafIndexes(_ context.Context, _ uuid.UUID, _ auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]int64, error) {
	out := map[uuid.UUID]int64{}
	for _, id := range ids {
		if l, ok := m.leaf[id]; ok {
			out[id] = l
		}
	}
	return out, nil
}

func (m *memLogs) LatestCheckpoint(context.Context, uuid.UUID, auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	return m.cp, m.cp.Size > 0, nil
}

func (m *memLogs) ReadLogHashes(_ context.Context, _ uuid.UUID, _ auditstore.LogKind, ix []int64) ([][32]byte, error) {
	hs, _ := m.ReadHashes(ix)
	out := make([][32]byte, len(hs))
	for i := range hs {
		out[i] = hs[i]
	}
	return out, nil
}

// append adds items' leaves and signs the checkpoint of the log.
func (m *memLogs) append(t *testing.T, key tlog.PrivateKey, items [][]byte) {
	t.Helper()
	for _, it := range items {
		e, err := tlog.ParseEntry(nil, it)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := sumtlog.StoredHashesForRecordHash(m.size, e.Leaf, m)
		if err != nil {
			t.Fatal(err)
		}
		m.hashes = append(m.hashes, hs...)
		m.leaf[uuid.MustParse(e.EventID())] = m.size
		m.size++
	}
	root, err := sumtlog.TreeHash(m.size, m)
	if err != nil {
		t.Fatal(err)
	}
	note, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("auditrail", m.org, tlog.KindAudit), Size: m.size, Root: tlog.Hash(root), Time: time.Now()}, key)
	if err != nil {
		t.Fatal(err)
	}
	m.cp = auditstore.Checkpoint{Size: m.size, Root: root, Note: note}
}

func items(t *testing.T, org uuid.UUID, n int, seed uint64) [][]byte {
	t.Helper()
	g := synth.New(org, 2, seed)
	out := make([][]byte, n)
	for i := range out {
		ev := g.Event(time.Now())
		e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: time.Now().UTC().Truncate(time.Millisecond)}
		b, err := json.Marshal(apiitem.NewItem(&e))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// body is a POST as the worker makes it: the entries delivered (those of
// keep) with their leaf_index, then the batch lines.
func body(t *testing.T, w *worker, m *memLogs, its [][]byte, keep func(i int) bool) []byte {
	t.Helper()
	var b []byte
	var leaves [2][]int64
	for i, it := range its {
		if !keep(i) {
			continue
		}
		e, _ := tlog.ParseEntry(nil, it)
		l := m.leaf[uuid.MustParse(e.EventID())]
		var v map[string]any
		_ = json.Unmarshal(it, &v)
		v["leaf_index"] = l
		line, _ := json.Marshal(v)
		b = append(append(b, line...), '\n')
		leaves[auditstore.LogAudit] = append(leaves[auditstore.LogAudit], l)
	}
	lines, marks, err := w.batchLines(m.org, leaves, [2]auditstore.Checkpoint{m.cp})
	if err != nil {
		t.Fatal(err)
	}
	w.marks = marks
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

func kinds(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return strings.Join(out, "\n")
}

// The batches a worker proves verify at a receiver, batch after batch,
// with a filter leaving leaves out; a batch removed is a gap, a batch
// delivered twice a duplicate, an altered entry and a forked log fail.
func TestBatchProofs(t *testing.T) {
	org := uuid.New()
	key, pub, err := tlog.GenerateKey("auditrail", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := tlog.NewKeySet(pub)
	if err != nil {
		t.Fatal(err)
	}
	newWorker := func(m *memLogs) *worker {
		return &worker{d: &Deliverer{logs: m, cfg: DefaultConfig()}, ctx: context.Background(), log: slog.New(slog.DiscardHandler),
			marks: [2]proofMark{{Next: -1}, {Next: -1}}}
	}
	m := &memLogs{org: org, leaf: map[uuid.UUID]int64{}}
	w := newWorker(m)
	v := NewBatchVerifier(ks)
	all := func(int) bool { return true }
	odd := func(i int) bool { return i%2 == 1 }
	var bodies [][]byte
	for round, n := range []int{5, 1, 300, 17} {
		its := items(t, org, n, uint64(round+1))
		m.append(t, key, its)
		keep := all
		if round == 2 {
			keep = odd // the filter: the even ones come as subtrees
		}
		b := body(t, w, m, its, keep)
		bodies = append(bodies, b)
		got := v.Body(b)
		if len(got) != 1 || got[0].Kind != "verified" {
			t.Fatalf("round %d: %s\n%s", round, kinds(got), b)
		}
	}

	t.Run("a batch removed", func(t *testing.T) {
		v := NewBatchVerifier(ks)
		for i, b := range bodies {
			if i == 1 {
				continue
			}
			got := v.Body(b)
			if i == 2 && (len(got) != 2 || got[0].Kind != "gap" || !strings.Contains(got[0].Message, "leaves 5..5 were never delivered")) {
				t.Fatalf("after the removed batch: %s", kinds(got))
			}
		}
	})
	t.Run("a batch twice", func(t *testing.T) {
		v := NewBatchVerifier(ks)
		v.Body(bodies[0])
		v.Body(bodies[1])
		got := v.Body(bodies[1])
		if !strings.Contains(kinds(got), "duplicate: ") || !strings.Contains(kinds(got), "leaves 5..5 were covered again") {
			t.Fatalf("a batch delivered twice: %s", kinds(got))
		}
	})
	t.Run("an altered entry", func(t *testing.T) {
		v := NewBatchVerifier(ks)
		b := []byte(strings.Replace(string(bodies[0]), `"display_name":"`, `"display_name":"X`, 1))
		if got := v.Body(b); len(got) != 1 || got[0].Kind != "fail" || !strings.Contains(got[0].Message, "do not make the checkpoint's root") {
			t.Fatalf("an altered entry: %s", kinds(got))
		}
	})
	t.Run("a forked log", func(t *testing.T) {
		// Another log of the organization signed by the same key: its
		// first batch does not continue the tree the receiver saw.
		fork := &memLogs{org: org, leaf: map[uuid.UUID]int64{}}
		fw := newWorker(fork)
		v := NewBatchVerifier(ks)
		v.Body(bodies[0])
		its := items(t, org, 9, 99)
		fork.append(t, key, its[:5])
		_ = body(t, fw, fork, its[:5], all)
		fork.append(t, key, its[5:])
		got := v.Body(body(t, fw, fork, its[5:], all))
		if !strings.Contains(kinds(got), "fail: ") || !strings.Contains(kinds(got), "forked") {
			t.Fatalf("a forked log: %s", kinds(got))
		}
	})
	t.Run("another key", func(t *testing.T) {
		other, otherPub, _ := tlog.GenerateKey("auditrail", time.Now().Add(-time.Hour))
		_ = otherPub
		m2 := &memLogs{org: org, leaf: map[uuid.UUID]int64{}}
		its := items(t, org, 3, 7)
		m2.append(t, other, its)
		got := NewBatchVerifier(ks).Body(body(t, newWorker(m2), m2, its, all))
		if len(got) != 1 || got[0].Kind != "fail" || !strings.Contains(got[0].Message, "unknown key") {
			t.Fatalf("a checkpoint of another key: %s", kinds(got))
		}
	})
}

func FuzzBatchVerifier(f *testing.F) {
	f.Add([]byte(`{"type":"batch","organization_id":"` + uuid.NewString() + `","log":"audit_logs","first_leaf":0,"last_leaf":0,"size":1,"checkpoint":"x","nodes":[]}`))
	f.Add([]byte("{\"organization_id\":\"" + uuid.NewString() + "\",\"leaf_index\":3}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, pub, _ := tlog.GenerateKey("auditrail", time.Now())
		ks, _ := tlog.NewKeySet(pub)
		_ = NewBatchVerifier(ks).Body(b) // never panics
	})
}
