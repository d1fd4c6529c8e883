package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/tlogtest"
	"github.com/auditrail/auditrail/internal/tlog/verify"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

var (
	org    = uuid.MustParse("5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b")
	origin = tlog.Origin("audit.example.com", org, tlog.KindAudit)
	t0     = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

// fixture is a log of n entries, its keys (an old one retired at t0, the
// current one since t0) and its export.
type fixture struct {
	items       [][]byte
	leaves      []tlog.Hash
	key, oldKey tlog.PrivateKey
	keys        tlog.KeySet
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	f := &fixture{items: auditItems(org, n, 7, t0.Add(-48*time.Hour))}
	var err error
	if f.leaves, err = tlogtest.Leaves(f.items); err != nil {
		t.Fatal(err)
	}
	key, pub, err := tlog.GenerateKey("audit.example.com", t0)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, oldPub, err := tlog.GenerateKey("audit.example.com-old", t0.AddDate(-1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f.key, f.oldKey = key, oldKey
	if f.keys, err = tlog.NewKeySet(pub, oldPub.Retire(t0)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) sign(t *testing.T, size int64, at time.Time, key tlog.PrivateKey) []byte {
	t.Helper()
	note, err := tlogtest.Sign(f.leaves, size, origin, at, key)
	if err != nil {
		t.Fatal(err)
	}
	return note
}

// sealed is the checkpoint of the whole log with a sealed_until line.
func (f *fixture) sealed(t *testing.T, until time.Time) []byte {
	t.Helper()
	n := int64(len(f.items))
	note, err := tlog.Sign(tlog.Checkpoint{Origin: origin, Size: n, Root: tlog.RootOf(append([]tlog.Hash(nil), f.leaves[:n]...)), Time: t0.Add(time.Hour), SealedUntil: until}, f.key)
	if err != nil {
		t.Fatal(err)
	}
	return note
}

// lines is the export: an entry per line, in leaf order, then the
// checkpoint line.
func (f *fixture) lines(t *testing.T) [][]byte {
	var out [][]byte
	for i, it := range f.items {
		out = append(out, tlogtest.Line(it, int64(i)))
	}
	return append(out, tlogtest.CheckpointLine(f.sign(t, int64(len(f.items)), t0.Add(time.Hour), f.key)))
}

func join(lines [][]byte) []byte { return append(bytes.Join(lines, []byte("\n")), '\n') }

func run(t *testing.T, export []byte, cfg verify.Config) *verify.Report {
	t.Helper()
	// A file, as the command reads it (event ids are read back by offset).
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, export, 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rep, err := verify.Export(context.Background(), fh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func eventOf(item []byte) string {
	e, _ := tlog.ParseEntry(nil, item)
	return e.EventID()
}

// Each tamper of issue 24 applied to an export is found, and said as what
// it is and where.
func TestExportTampers(t *testing.T) {
	const n = 40
	f := newFixture(t, n)
	ev := func(i int) string { return eventOf(f.items[i]) }
	swap := func(l [][]byte, i, j int) [][]byte {
		a, b := f.items[i], f.items[j]
		l[i], l[j] = tlogtest.Line(b, int64(i)), tlogtest.Line(a, int64(j))
		return l
	}
	for _, tc := range []struct {
		name  string
		edit  func(l [][]byte) [][]byte
		cfg   func(cfg *verify.Config)
		kinds []string // the problems expected, in order; none: OK
		says  []string
		newer int64
		// unchecked: the entries below the checkpoint's size that no root
		// covers (Report.Unchecked).
		unchecked int64
	}{
		{name: "good export"},
		{name: "lines in any order", edit: func(l [][]byte) [][]byte {
			out := append([][]byte{}, l[n/2:n]...)
			return append(append(out, l[:n/2]...), l[n])
		}},
		{name: "CRLF line ends and blank lines", edit: func(l [][]byte) [][]byte {
			for i := range l {
				l[i] = append(l[i], '\r')
			}
			return append([][]byte{{}}, l...)
		}},
		{name: "deleted entry", edit: func(l [][]byte) [][]byte { return append(l[:5:5], l[6:]...) },
			kinds: []string{verify.KindMissing}, says: []string{"leaf 5 missing: deleted", "note: 39 entries below the checkpoint's size could not be checked"}, unchecked: 39},
		{name: "two consecutive deleted entries", edit: func(l [][]byte) [][]byte { return append(l[:5:5], l[7:]...) },
			kinds: []string{verify.KindMissing}, says: []string{"leaves 5..6 missing: 2 consecutive entries deleted"}, unchecked: 38},
		{name: "two deletions apart", edit: func(l [][]byte) [][]byte { return append(append(l[:3:3], l[4:20]...), l[21:]...) },
			kinds: []string{verify.KindMissing, verify.KindMissing}, says: []string{"leaf 3 missing", "leaf 20 missing"}, unchecked: 38},
		{name: "altered field", edit: func(l [][]byte) [][]byte {
			l[17] = bytes.Replace(l[17], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			return l
		}, kinds: []string{verify.KindRoot}, says: []string{"root differs: the entries were reordered or altered", "two entries' contents were swapped"}},
		{name: "swapped entries", edit: func(l [][]byte) [][]byte { return swap(l, 3, 4) },
			kinds: []string{verify.KindRoot}, says: []string{"root differs"}},
		{name: "inserted entry claiming a leaf", edit: func(l [][]byte) [][]byte {
			fake := bytes.Replace(l[9], []byte(`"display_name":"`), []byte(`"display_name":"Mallory `), 1)
			return append(l[:12:12], append([][]byte{fake}, l[12:]...)...)
		}, kinds: []string{verify.KindDuplicate}, says: []string{"2 entries claim leaf 9: line 10 (event \"" + ev(9) + "\") is the log's; line 13 (event \"" + ev(9) + "\") was inserted"}},
		{name: "inserted entry without leaf_index", edit: func(l [][]byte) [][]byte {
			item := bytes.Replace(f.items[3], []byte(`,"leaf_index":null`), nil, 1)
			return append(l[:12:12], append([][]byte{item}, l[12:]...)...)
		}, kinds: []string{verify.KindMalformed}, says: []string{"line 13 (event \"" + ev(3) + "\") has no leaf_index"}},
		// A row inserted in the store is listed with leaf_index null: stored
		// (created_time) long before the checkpoint, it should be in the log.
		{name: "inserted entry with leaf_index null", edit: func(l [][]byte) [][]byte {
			return append(l[:12:12], append([][]byte{f.items[3]}, l[12:]...)...)
		}, kinds: []string{verify.KindInserted}, says: []string{"line 13 (event \"" + ev(3) + "\") is not in the log (leaf_index null) and was stored at"}},
		// An entry not sequenced yet, within the grace: reported, not a problem.
		{name: "entry not sequenced yet", edit: func(l [][]byte) [][]byte {
			return append(l[:12:12], append([][]byte{f.items[3]}, l[12:]...)...)
		}, cfg: func(cfg *verify.Config) { cfg.PendingGrace = 100 * 24 * time.Hour },
			says: []string{"note: 1 entry not sequenced yet when exported (leaf_index null): not verified"}},
		// Within the grace, but stored before the checkpoint's seal: every
		// entry stored by then is in the log, so this one was inserted.
		{name: "not sequenced, yet sealed", edit: func(l [][]byte) [][]byte {
			l = append(l[:12:12], append([][]byte{f.items[3]}, l[12:]...)...)
			l[len(l)-1] = tlogtest.CheckpointLine(f.sealed(t, t0))
			return l
		}, cfg: func(cfg *verify.Config) { cfg.PendingGrace = 100 * 24 * time.Hour },
			kinds: []string{verify.KindInserted}, says: []string{"line 13 (event \"" + ev(3) + "\") is not in the log (leaf_index null) but was stored at", "at or before the checkpoint's sealed_until 2026-11-01T00:00:00.000Z"}},
		{name: "sealed, nothing pending", edit: func(l [][]byte) [][]byte {
			l[len(l)-1] = tlogtest.CheckpointLine(f.sealed(t, t0))
			return l
		}, says: []string{"note: the checkpoint seals the log up to 2026-11-01T00:00:00.000Z (sealed_until)"}},
		{name: "inserted entry renumbering the rest", edit: func(l [][]byte) [][]byte {
			out := append([][]byte{}, l[:10]...)
			out = append(out, tlogtest.Line(f.items[2], 10))
			for i := 10; i < n; i++ {
				out = append(out, tlogtest.Line(f.items[i], int64(i+1)))
			}
			return append(out, l[n])
		}, kinds: []string{verify.KindRoot}, says: []string{"root differs"}, newer: 1},
		{name: "truncated tail", edit: func(l [][]byte) [][]byte { return append(l[:n-3:n-3], l[n]) },
			kinds: []string{verify.KindMissing}, says: []string{"leaves 37..39 missing: 3 consecutive entries deleted (the tail of the log was truncated)"}, unchecked: 37},
		{name: "entries newer than the checkpoint", edit: func(l [][]byte) [][]byte {
			return append(l[:n], tlogtest.Line(f.items[0], n), tlogtest.Line(f.items[1], n+1), l[n])
		}, newer: 2},
		{name: "line not JSON", edit: func(l [][]byte) [][]byte {
			return append(l[:7:7], append([][]byte{[]byte(`{"event_id": "x", oops`)}, l[7:]...)...)
		}, kinds: []string{verify.KindMalformed}, says: []string{"line 8 is not an entry of the export"}},
		{name: "checkpoint line not last", edit: func(l [][]byte) [][]byte { return append(append([][]byte{}, l[n]), l[:n]...) },
			kinds: []string{verify.KindOrder}, says: []string{"line 1 carries the checkpoint but lines follow it"}},
		{name: "unknown key", edit: func(l [][]byte) [][]byte {
			other, _, _ := tlog.GenerateKey("audit.example.com", t0)
			l[n] = tlogtest.CheckpointLine(f.sign(t, n, t0.Add(time.Hour), other))
			return l
		}, kinds: []string{verify.KindCheckpoint}, says: []string{"checkpoint signed by unknown key "}},
		{name: "checkpoint altered after signing", edit: func(l [][]byte) [][]byte {
			l[n] = bytes.Replace(l[n], []byte(`\n40\n`), []byte(`\n39\n`), 1)
			return l
		}, kinds: []string{verify.KindCheckpoint}, says: []string{"altered after it was signed"}},
		{name: "old key inside its window", edit: func(l [][]byte) [][]byte {
			l[n] = tlogtest.CheckpointLine(f.sign(t, n, t0.Add(-time.Minute), f.oldKey))
			return l
		}},
		{name: "old key after its retirement", edit: func(l [][]byte) [][]byte {
			l[n] = tlogtest.CheckpointLine(f.sign(t, n, t0.Add(time.Minute), f.oldKey))
			return l
		}, kinds: []string{verify.KindCheckpoint}, says: []string{"signed outside its key's validity", "until 2026-11-01T00:00:00.000Z"}},
		{name: "kept checkpoint extended", cfg: func(c *verify.Config) { c.Since = f.sign(t, 25, t0, f.key) }},
		{name: "kept checkpoint of the same size", cfg: func(c *verify.Config) { c.Since = f.sign(t, n, t0.Add(time.Minute), f.key) }},
		{name: "rolled back", edit: func(l [][]byte) [][]byte {
			l[n] = tlogtest.CheckpointLine(f.sign(t, 30, t0.Add(2*time.Hour), f.key))
			return l
		}, cfg: func(c *verify.Config) { c.Since = f.sign(t, n, t0.Add(time.Hour), f.key) },
			kinds: []string{verify.KindRolledBack}, says: []string{"rolled back: the kept checkpoint of 2026-11-01T01:00:00.000Z covers 40 entries, the log's checkpoint of 2026-11-01T02:00:00.000Z only 30"}, newer: 10},
		{name: "history rewritten before the kept checkpoint", edit: func(l [][]byte) [][]byte {
			// The log re-signed after leaf 2 changed: the export matches its
			// checkpoint, not the one kept.
			l[2] = bytes.Replace(l[2], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			e, _ := tlog.ParseEntry(nil, l[2])
			leaves := append([]tlog.Hash(nil), f.leaves...)
			leaves[2] = e.Leaf
			note, _ := tlogtest.Sign(leaves, n, origin, t0.Add(time.Hour), f.key)
			l[n] = tlogtest.CheckpointLine(note)
			return l
		}, cfg: func(c *verify.Config) { c.Since = f.sign(t, 10, t0, f.key) },
			kinds: []string{verify.KindInconsistent}, says: []string{"not consistent with the kept checkpoint of 2026-11-01T00:00:00.000Z: the first 10 entries do not hash to its root"}},
		{name: "altered after the kept checkpoint", edit: func(l [][]byte) [][]byte {
			l[30] = bytes.Replace(l[30], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			return l
		}, cfg: func(c *verify.Config) { c.Since = f.sign(t, 25, t0, f.key) },
			kinds: []string{verify.KindRoot}, says: []string{"the first 25 entries match the kept checkpoint, so the change is at leaf 25 or later"}},
		{name: "truncated tail after the kept checkpoint", edit: func(l [][]byte) [][]byte { return append(l[:n-3:n-3], l[n]) },
			cfg:   func(c *verify.Config) { c.Since = f.sign(t, 25, t0, f.key) },
			kinds: []string{verify.KindMissing}, says: []string{"leaves 37..39 missing", "note: the first 25 entries (leaves 0..24) match the kept checkpoint: none of them was altered", "note: 12 entries below"}, unchecked: 12},
		// A deleted entry does not hide an altered one where the export
		// and the checkpoints can tell: the kept checkpoint covers it.
		{name: "entry deleted after the kept checkpoint, another altered before it", edit: func(l [][]byte) [][]byte {
			l[7] = bytes.Replace(l[7], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			return append(l[:30:30], l[31:]...)
		}, cfg: func(c *verify.Config) { c.Since = f.sign(t, 25, t0, f.key) },
			kinds: []string{verify.KindInconsistent, verify.KindMissing}, says: []string{"not consistent with the kept checkpoint", "leaf 30 missing", "note: 39 entries below"}, unchecked: 39},
		// Without one, the altered entry cannot be named offline: the
		// report says that the entries present were not checked.
		{name: "entry deleted and another altered", edit: func(l [][]byte) [][]byte {
			l[17] = bytes.Replace(l[17], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			return append(l[:5:5], l[6:]...)
		}, kinds: []string{verify.KindMissing}, says: []string{"leaf 5 missing", "note: 39 entries below the checkpoint's size could not be checked", "verifying online checks each entry's inclusion proof"}, unchecked: 39},
		{name: "truncated tail and history rewritten before the kept checkpoint", edit: func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
			return append(l[:n-3:n-3], l[n])
		}, cfg: func(c *verify.Config) { c.Since = f.sign(t, 25, t0, f.key) },
			kinds: []string{verify.KindInconsistent, verify.KindMissing}, says: []string{"not consistent with the kept checkpoint", "leaves 37..39 missing"}, unchecked: 37},
		{name: "kept checkpoint of another log", cfg: func(c *verify.Config) {
			other, _ := tlogtest.Sign(f.leaves, 5, tlog.Origin("audit.example.com", org, tlog.KindExecutions), t0, f.key)
			c.Since = other
		}, kinds: []string{verify.KindInconsistent}, says: []string{"is of another log"}},
		{name: "checkpoint given apart, export cut before its own", edit: func(l [][]byte) [][]byte { return l[:n-2] },
			cfg:   func(c *verify.Config) { c.Checkpoint = f.sign(t, n, t0.Add(time.Hour), f.key) },
			kinds: []string{verify.KindMissing}, says: []string{"leaves 38..39 missing"}, unchecked: 38},
		{name: "older checkpoint given apart", cfg: func(c *verify.Config) { c.Checkpoint = f.sign(t, 20, t0.Add(time.Minute), f.key) }, newer: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := f.lines(t)
			if tc.edit != nil {
				l = tc.edit(l)
			}
			cfg := verify.Config{Keys: f.keys}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			rep := run(t, join(l), cfg)
			var out bytes.Buffer
			rep.Write(&out)
			t.Log("\n" + out.String())
			var kinds []string
			for _, p := range rep.Problems {
				kinds = append(kinds, p.Kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tc.kinds) || rep.OK() != (len(tc.kinds) == 0) {
				t.Fatalf("problems %v, want %v:\n%s", kinds, tc.kinds, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Fatalf("the report does not say %q:\n%s", s, out.String())
				}
			}
			if rep.Newer != tc.newer {
				t.Fatalf("%d newer entries, want %d", rep.Newer, tc.newer)
			}
			if rep.Unchecked != tc.unchecked {
				t.Fatalf("%d entries unchecked, want %d", rep.Unchecked, tc.unchecked)
			}
			noRoot := slices.ContainsFunc(tc.kinds, func(k string) bool {
				return k == verify.KindMissing || k == verify.KindRoot || k == verify.KindCheckpoint
			})
			if rep.RootVerified == noRoot {
				t.Fatalf("RootVerified %v with the problems %v", rep.RootVerified, tc.kinds)
			}
			if rep.OK() && !strings.Contains(out.String(), "OK: ") {
				t.Fatalf("no OK line:\n%s", out.String())
			}
		})
	}
}

// Report.Add puts the problems found apart from Export (online: by the
// inclusion proofs) in leaf order among Export's, within MaxProblems.
func TestReportAdd(t *testing.T) {
	f := newFixture(t, 20)
	l := f.lines(t)
	l = append(l[:5:5], l[6:]...) // leaf 5 missing
	rep := run(t, join(l), verify.Config{Keys: f.keys, MaxProblems: 3})
	rep.Add(verify.Problem{Kind: verify.KindAltered, Leaf: 12, Message: "leaf 12 altered"})
	rep.Add(verify.Problem{Kind: verify.KindAltered, Leaf: 2, Message: "leaf 2 altered"})
	rep.Add(verify.Problem{Kind: verify.KindAltered, Leaf: 1, Message: "leaf 1 altered"})
	var leaves []int64
	for _, p := range rep.Problems {
		leaves = append(leaves, p.Leaf)
	}
	if fmt.Sprint(leaves) != "[2 5 12]" || rep.MoreProblems != 1 || rep.OK() {
		t.Fatalf("problems at leaves %v and %d more, want [2 5 12] and 1 more", leaves, rep.MoreProblems)
	}
	var out bytes.Buffer
	rep.Write(&out)
	if !strings.Contains(out.String(), "FAIL: leaf 2 altered\nFAIL: leaf 5 missing: deleted\nFAIL: leaf 12 altered\nFAIL: and 1 more problem\n") ||
		!strings.Contains(out.String(), "NOT VERIFIED: 4 problems") {
		t.Fatalf("the report:\n%s", out.String())
	}
}

// Without a checkpoint (the export was cut, and none is given) nothing can
// be verified: an error, not a pass.
func TestExportNoCheckpoint(t *testing.T) {
	f := newFixture(t, 5)
	l := f.lines(t)
	_, err := verify.Export(context.Background(), bytes.NewReader(join(l[:5])), verify.Config{Keys: f.keys})
	if !errors.Is(err, verify.ErrNoCheckpoint) {
		t.Fatalf("got %v", err)
	}
}

// An export larger than the reader's blocks (lines cut across blocks) and
// read from a plain reader (no event ids read back) verifies the same; a
// line over the entry bound stops the scan with an error naming it.
func TestExportLarge(t *testing.T) {
	const n = 6000
	f := newFixture(t, n)
	l := f.lines(t)
	rep, err := verify.Export(context.Background(), bytes.NewReader(join(l)), verify.Config{Keys: f.keys, Workers: 3})
	if err != nil || !rep.OK() || rep.Entries != n || rep.Checkpoint.Size != n {
		t.Fatalf("%v %+v", err, rep)
	}
	orig := l[4000]
	l[4000] = bytes.Replace(orig, []byte(`"display_name":"`), []byte(`"display_name":"`+strings.Repeat("x", tlog.MaxEntryBytes)), 1)
	rep, err = verify.Export(context.Background(), bytes.NewReader(join(l)), verify.Config{Keys: f.keys})
	if err != nil || rep.OK() || rep.Problems[0].Line != 4001 || !strings.Contains(rep.Problems[0].Message, "input too large") {
		t.Fatalf("long line: %v %+v", err, rep)
	}
	l[4000] = bytes.Replace(orig, []byte(`"display_name":"`), []byte(`"display_name":"`+strings.Repeat("x", 3*tlog.MaxEntryBytes)), 1)
	_, err = verify.Export(context.Background(), bytes.NewReader(join(l)), verify.Config{Keys: f.keys})
	if err == nil || !strings.Contains(err.Error(), "line 4001 is longer than") {
		t.Fatalf("very long line: %v", err)
	}
}

// FuzzExport: any export bytes give a report or an error, never a panic,
// and never OK unless the entries are the log's.
func FuzzExport(f *testing.F) {
	key, pub, _ := tlog.GenerateKey("audit.example.com", t0)
	keys, _ := tlog.NewKeySet(pub)
	items := auditItems(org, 3, 1, t0)
	leaves, _ := tlogtest.Leaves(items)
	note, _ := tlogtest.Sign(leaves, 3, origin, t0.Add(time.Hour), key)
	var good [][]byte
	for i, it := range items {
		good = append(good, tlogtest.Line(it, int64(i)))
	}
	good = append(good, tlogtest.CheckpointLine(note))
	f.Add(join(good))
	f.Add([]byte("{\"leaf_index\":0}\n{\"checkpoint\":\"x\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := verify.Export(context.Background(), bytes.NewReader(b), verify.Config{Keys: keys, Workers: 2})
		if err != nil || !rep.OK() {
			return
		}
		// OK: the leaves of the entries at 0..size-1 give the signed root.
		if rep.Checkpoint.Size > 3 || rep.Checkpoint.Root != tlog.RootOf(append([]tlog.Hash(nil), leaves[:rep.Checkpoint.Size]...)) {
			t.Fatalf("verified a log the key never signed: %+v", rep.Checkpoint)
		}
	})
}

// auditItems renders n synthetic audit events of org as the list route
// returns them (apiitem.Item JSON), one second apart from start.
func auditItems(org uuid.UUID, n int, seed uint64, start time.Time) [][]byte {
	g := synth.New(org, 3, seed)
	out := make([][]byte, n)
	for i := range out {
		ts := start.Add(time.Duration(i) * time.Second)
		ev := g.Event(ts)
		e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: ts.Add(20 * time.Millisecond)}
		b, err := json.Marshal(apiitem.NewItem(&e))
		if err != nil {
			panic(err)
		}
		out[i] = b
	}
	return out
}

// A file of garbage reports its first problems and counts the rest: the
// report stays small.
func TestExportGarbageBounded(t *testing.T) {
	f := newFixture(t, 3)
	l := f.lines(t)
	garbage := bytes.Repeat([]byte("not json\n"), 12_000)
	export := append(append(garbage, join(l[:3])...), append(l[3], '\n')...)
	rep := run(t, export, verify.Config{Keys: f.keys, MaxProblems: 20})
	if rep.OK() || len(rep.Problems) != 20 || rep.MoreProblems != 12_000-20 {
		t.Fatalf("%d problems listed, %d more", len(rep.Problems), rep.MoreProblems)
	}
	var out bytes.Buffer
	rep.Write(&out)
	if !strings.Contains(out.String(), "FAIL: and 11980 more problems") {
		t.Fatal(out.String())
	}
}

// The empty log: an export holding only its checkpoint (size 0, the root
// of nothing) verifies; one entry beside it is newer than the checkpoint.
func TestExportEmptyLog(t *testing.T) {
	f := newFixture(t, 1)
	cp := tlogtest.CheckpointLine(f.sign(t, 0, t0.Add(time.Hour), f.key))
	rep := run(t, join([][]byte{cp}), verify.Config{Keys: f.keys})
	var out bytes.Buffer
	rep.Write(&out)
	if !rep.OK() || !strings.Contains(out.String(), "OK: the log is empty, as the checkpoint") {
		t.Fatal(out.String())
	}
	rep = run(t, join([][]byte{tlogtest.Line(f.items[0], 0), cp}), verify.Config{Keys: f.keys})
	if !rep.OK() || rep.Newer != 1 {
		t.Fatalf("%+v", rep)
	}
}
