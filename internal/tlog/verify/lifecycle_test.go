package verify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/tlogtest"
	"github.com/auditrail/auditrail/internal/tlog/verify"
)

// lifecycleFixture is a log of 60 entries whose entry 50 is the expiry
// record of leaves 0..29 keeping 3 and 17 (held), the export without the
// expired ones.
type lifecycleFixture struct {
	*fixture
	mem *tlog.MemoryLog
}

const (
	lcSize   = 60
	lcRecord = 50
	lcBelow  = 30
)

var lcKept = map[int]bool{3: true, 17: true}

func newLifecycleFixture(t *testing.T, record tlog.LifecycleRecord) *lifecycleFixture {
	t.Helper()
	f := newFixture(t, lcSize)
	var item map[string]any
	if err := json.Unmarshal(f.items[lcRecord], &item); err != nil {
		t.Fatal(err)
	}
	item["data"] = map[string]any{tlog.LifecycleMember: record}
	delete(item, tlog.LeafIndexMember)
	b, err := json.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	f.items[lcRecord] = b
	if f.leaves, err = tlogtest.Leaves(f.items); err != nil {
		t.Fatal(err)
	}
	mem := &tlog.MemoryLog{}
	for _, l := range f.leaves {
		if _, err := mem.Append(l); err != nil {
			t.Fatal(err)
		}
	}
	return &lifecycleFixture{fixture: f, mem: mem}
}

func expiryRecord() tlog.LifecycleRecord {
	return tlog.LifecycleRecord{Type: tlog.RecordExpiry, Log: tlog.LogNameAudit, BelowLeaf: lcBelow, Kept: 2, Expired: 28,
		Retention: "400d", Cutoff: t0.Add(-24 * time.Hour), Holds: []string{"5f0c7d52-7a86-4c31-9f59-3d4f5fb0e3a1"}}
}

// runLine is the expired line of leaves lo..hi with the log's hashes.
func (f *lifecycleFixture) runLine(t *testing.T, lo, hi int64) []byte {
	t.Helper()
	var hs []string
	for _, p := range tlog.Pieces(lo, hi+1) {
		h, err := f.mem.ReadHashes(context.Background(), []int64{p.StoredIndex()})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, base64.StdEncoding.EncodeToString(h[0][:]))
	}
	b, _ := json.Marshal(map[string]any{tlog.ExpiredLineMember: tlog.ExpiredRun{FirstLeaf: lo, LastLeaf: hi, Hashes: hs}})
	return b
}

// recordLine proves entry lcRecord in the checkpoint of size.
func (f *lifecycleFixture) recordLine(t *testing.T, entry []byte, size int64) []byte {
	t.Helper()
	proof, err := tlog.InclusionProof(context.Background(), f.mem, size, lcRecord)
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, h := range proof {
		ps = append(ps, base64.StdEncoding.EncodeToString(h[:]))
	}
	b, _ := json.Marshal(map[string]any{tlog.RecordLineMember: tlog.RecordProof{Entry: entry, LeafIndex: lcRecord, Proof: ps,
		Checkpoint: string(f.sign(t, size, t0.Add(time.Hour), f.key))}})
	return b
}

// export is the export after the expiry: the entries but the expired
// (skip, beside), the runs, the record, the checkpoint.
func (f *lifecycleFixture) export(t *testing.T, drop map[int]bool, runs [][2]int64, record []byte) []byte {
	var lines [][]byte
	for i, it := range f.items {
		if i < lcBelow && !lcKept[i] || drop[i] {
			continue
		}
		lines = append(lines, tlogtest.Line(it, int64(i)))
	}
	for _, r := range runs {
		lines = append(lines, f.runLine(t, r[0], r[1]))
	}
	if record != nil {
		lines = append(lines, record)
	}
	lines = append(lines, tlogtest.CheckpointLine(f.sign(t, lcSize, t0.Add(time.Hour), f.key)))
	return join(lines)
}

var lcRuns = [][2]int64{{0, 2}, {4, 16}, {18, 29}}

// An export after an expiry verifies and says what expired under which
// retention; each way to fake or overreach an expiry fails.
func TestExportAfterExpiry(t *testing.T) {
	f := newLifecycleFixture(t, expiryRecord())
	rec := f.recordLine(t, f.items[lcRecord], lcSize)
	rep := run(t, f.export(t, nil, lcRuns, rec), verify.Config{Keys: f.keys})
	var out strings.Builder
	rep.Write(&out)
	if !rep.OK() || !rep.RootVerified {
		t.Fatalf("the export after an expiry does not verify:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "note: 28 entries expired under the organization's retention of 400 days (expiry record at leaf 50 of the audit log") {
		t.Fatalf("no note of the expiry:\n%s", out.String())
	}

	// A record proved in an older checkpoint (still covering it) is as good.
	if rep := run(t, f.export(t, nil, lcRuns, f.recordLine(t, f.items[lcRecord], lcRecord+1)), verify.Config{Keys: f.keys}); !rep.OK() {
		t.Fatalf("a record proved at the checkpoint just after it: %+v", rep.Problems)
	}

	altered := strings.Replace(string(f.items[lcRecord]), `"kept":2`, `"kept":0`, 1)
	for _, tc := range []struct {
		name   string
		export []byte
		want   string
	}{
		{"a held entry deleted", f.export(t, map[int]bool{17: true}, [][2]int64{{0, 2}, {4, 29}}, rec), "held entries were deleted"},
		{"a held entry deleted, no run over it", f.export(t, map[int]bool{17: true}, lcRuns, rec), "leaf 17 missing"},
		{"an entry above the horizon deleted", f.export(t, map[int]bool{40: true}, lcRuns, rec), "leaf 40 missing"},
		{"a run beyond the horizon", f.export(t, map[int]bool{30: true, 31: true}, [][2]int64{{0, 2}, {4, 16}, {18, 31}}, rec), "beyond the expiry record's horizon"},
		{"no record", f.export(t, nil, lcRuns, nil), "no signed expiry record"},
		{"the record altered", f.export(t, nil, lcRuns, f.recordLine(t, []byte(altered), lcSize)), "the expiry record does not verify"},
		{"an expired leaf present", f.export(t, nil, [][2]int64{{0, 2}, {3, 16}, {18, 29}}, rec), "marks expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.export, verify.Config{Keys: f.keys})
			var out strings.Builder
			rep.Write(&out)
			if rep.OK() {
				t.Fatalf("verified:\n%s", out.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("the report does not say %q:\n%s", tc.want, out.String())
			}
		})
	}

	// A run whose hash is not the log's fails the root.
	bad := f.export(t, nil, lcRuns, rec)
	good := string(f.runLine(t, 4, 16))
	var run4 tlog.ExpiredRun
	var m map[string]tlog.ExpiredRun
	_ = json.Unmarshal([]byte(good), &m)
	run4 = m[tlog.ExpiredLineMember]
	run4.Hashes[0] = base64.StdEncoding.EncodeToString(make([]byte, 32))
	wrong, _ := json.Marshal(map[string]any{tlog.ExpiredLineMember: run4})
	rep = run(t, []byte(strings.Replace(string(bad), good, string(wrong), 1)), verify.Config{Keys: f.keys})
	if rep.OK() || rep.RootVerified {
		t.Fatal("a false subtree hash verified")
	}
}

func TestParseLifecycleRecord(t *testing.T) {
	good, _ := json.Marshal(map[string]any{"data": map[string]any{"lifecycle": expiryRecord()}})
	if r, err := tlog.ParseLifecycleRecord(good); err != nil || r.BelowLeaf != lcBelow {
		t.Fatalf("ParseLifecycleRecord = %+v, %v", r, err)
	}
	for _, bad := range []string{
		`{"data": null}`, `{"data": {"before": 1}}`, `{"data": {"lifecycle": {"type": "erase"}}}`,
		`{"data": {"lifecycle": {"type": "expiry", "log": "x", "below_leaf": 3}}}`,
		`{"data": {"lifecycle": {"type": "expiry", "log": "audit_logs", "below_leaf": 3, "kept": 3, "expired": 1}}}`,
		`not json`,
	} {
		if _, err := tlog.ParseLifecycleRecord([]byte(bad)); err == nil {
			t.Fatalf("ParseLifecycleRecord(%s): no error", bad)
		}
	}
}

// An export after an erasure: the erased entries carry their original leaf
// hash and a record of the erasure names their leaves; it verifies and
// says so. An erasure member without a record, or with a false hash, fails.
func TestExportAfterErasure(t *testing.T) {
	const erasure = "0b7e2c1a-5d43-4f6e-8a9b-1c2d3e4f5a6b"
	f := newFixture(t, 30)
	var item map[string]any
	if err := json.Unmarshal(f.items[25], &item); err != nil {
		t.Fatal(err)
	}
	delete(item, tlog.LeafIndexMember)
	item["data"] = map[string]any{tlog.LifecycleMember: tlog.LifecycleRecord{Type: tlog.RecordErasure, Erasure: erasure, Log: tlog.LogNameAudit,
		Leaves: [][2]int64{{10, 11}}, Fields: []string{"display_name"}, Pseudonym: "erased-0123456789abcdef"}}
	f.items[25], _ = json.Marshal(item)
	var err error
	if f.leaves, err = tlogtest.Leaves(f.items); err != nil {
		t.Fatal(err)
	}
	mem := &tlog.MemoryLog{}
	for _, l := range f.leaves {
		if _, err := mem.Append(l); err != nil {
			t.Fatal(err)
		}
	}
	lf := &lifecycleFixture{fixture: f, mem: mem}
	proof, err := tlog.InclusionProof(context.Background(), mem, 30, 25)
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, h := range proof {
		ps = append(ps, base64.StdEncoding.EncodeToString(h[:]))
	}
	recLine, _ := json.Marshal(map[string]any{tlog.RecordLineMember: tlog.RecordProof{Entry: f.items[25], LeafIndex: 25, Proof: ps,
		Checkpoint: string(lf.sign(t, 30, t0.Add(time.Hour), f.key))}})
	erase := func(i int, leaf tlog.Hash) []byte {
		var m map[string]any
		_ = json.Unmarshal(f.items[i], &m)
		m["display_name"] = "erased-0123456789abcdef"
		delete(m, tlog.LeafIndexMember)
		m[tlog.ErasureMember] = tlog.ErasureRef{ID: erasure, LeafHash: base64.StdEncoding.EncodeToString(leaf[:])}
		b, _ := json.Marshal(m)
		return tlogtest.Line(b, int64(i))
	}
	export := func(erased map[int]tlog.Hash, record bool) []byte {
		var lines [][]byte
		for i, it := range f.items {
			if h, ok := erased[i]; ok {
				lines = append(lines, erase(i, h))
				continue
			}
			lines = append(lines, tlogtest.Line(it, int64(i)))
		}
		if record {
			lines = append(lines, recLine)
		}
		return join(append(lines, tlogtest.CheckpointLine(lf.sign(t, 30, t0.Add(time.Hour), f.key))))
	}
	rep := run(t, export(map[int]tlog.Hash{10: f.leaves[10], 11: f.leaves[11]}, true), verify.Config{Keys: f.keys})
	var out strings.Builder
	rep.Write(&out)
	if !rep.OK() || !strings.Contains(out.String(), "note: 2 entries erased by erasure "+erasure) {
		t.Fatalf("the export after an erasure:\n%s", out.String())
	}
	for name, tc := range map[string]struct {
		erased map[int]tlog.Hash
		record bool
		want   string
	}{
		"no record":               {map[int]tlog.Hash{10: f.leaves[10]}, false, "no signed erasure record of this log names it"},
		"a leaf it does not name": {map[int]tlog.Hash{12: f.leaves[12]}, true, "no signed erasure record of this log names it"},
		"a false leaf hash":       {map[int]tlog.Hash{10: f.leaves[3]}, true, "root differs"},
	} {
		rep := run(t, export(tc.erased, tc.record), verify.Config{Keys: f.keys})
		var out strings.Builder
		rep.Write(&out)
		if rep.OK() || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: the report does not fail with %q:\n%s", name, tc.want, out.String())
		}
	}
}

// An export after an erasure of entries of version 2 (salted): each
// erased entry hashes to its leaf again, its erased fields opened by
// their commitments; the report says every other field was checked, and
// a field the erasure did not replace, altered by hand, fails.
func TestExportAfterErasureV2(t *testing.T) {
	const erasure = "0b7e2c1a-5d43-4f6e-8a9b-1c2d3e4f5a6b"
	f := newFixture(t, 30)
	salt := []byte("0123456789abcdef")
	edit := func(i int, change func(m map[string]any)) {
		var m map[string]any
		if err := json.Unmarshal(f.items[i], &m); err != nil {
			t.Fatal(err)
		}
		delete(m, tlog.LeafIndexMember)
		change(m)
		f.items[i], _ = json.Marshal(m)
	}
	for _, i := range []int{10, 11} {
		edit(i, func(m map[string]any) {
			m[tlog.SaltMember] = base64.StdEncoding.EncodeToString(salt)
			m["data"] = map[string]any{"by": m["display_name"], "n": i}
		})
	}
	edit(25, func(m map[string]any) {
		m["data"] = map[string]any{tlog.LifecycleMember: tlog.LifecycleRecord{Type: tlog.RecordErasure, Erasure: erasure, Log: tlog.LogNameAudit,
			Leaves: [][2]int64{{10, 11}}, Fields: []string{"data", "display_name"}, Pseudonym: "erased-0123456789abcdef"}}
	})
	var err error
	if f.leaves, err = tlogtest.Leaves(f.items); err != nil {
		t.Fatal(err)
	}
	mem := &tlog.MemoryLog{}
	for _, l := range f.leaves {
		if _, err := mem.Append(l); err != nil {
			t.Fatal(err)
		}
	}
	lf := &lifecycleFixture{fixture: f, mem: mem}
	proof, err := tlog.InclusionProof(context.Background(), mem, 30, 25)
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, h := range proof {
		ps = append(ps, base64.StdEncoding.EncodeToString(h[:]))
	}
	recLine, _ := json.Marshal(map[string]any{tlog.RecordLineMember: tlog.RecordProof{Entry: f.items[25], LeafIndex: 25, Proof: ps,
		Checkpoint: string(lf.sign(t, 30, t0.Add(time.Hour), f.key))}})
	// erased is entry i as the erasure serves it, then altered by hand.
	erased := func(i int, alter func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(f.items[i], &m)
		delete(m, tlog.SaltMember)
		m["display_name"] = "erased-0123456789abcdef"
		m["data"].(map[string]any)["by"] = "erased-0123456789abcdef"
		now, _ := json.Marshal(m)
		fields, err := tlog.OpenErased(f.items[i], now, salt)
		if err != nil {
			t.Fatal(err)
		}
		m[tlog.ErasureMember] = map[string]any{"id": erasure, "leaf_hash": base64.StdEncoding.EncodeToString(f.leaves[i][:]), "fields": fields}
		if alter != nil {
			alter(m)
		}
		b, _ := json.Marshal(m)
		return tlogtest.Line(b, int64(i))
	}
	export := func(alter func(m map[string]any)) []byte {
		var lines [][]byte
		for i, it := range f.items {
			switch i {
			case 10:
				lines = append(lines, erased(i, alter))
			case 11:
				lines = append(lines, erased(i, nil))
			default:
				lines = append(lines, tlogtest.Line(it, int64(i)))
			}
		}
		lines = append(lines, recLine)
		return join(append(lines, tlogtest.CheckpointLine(lf.sign(t, 30, t0.Add(time.Hour), f.key))))
	}
	for name, tc := range map[string]struct {
		alter func(m map[string]any)
		ok    bool
		want  string
	}{
		"as erased":                {nil, true, "note: 2 entries erased by erasure " + erasure + " (their identifying fields replaced by a pseudonym after a signed record named their leaves; every field the erasure did not replace checked against the entry's leaf)"},
		"another pseudonym":        {func(m map[string]any) { m["display_name"] = "someone" }, true, "2 entries erased"},
		"the action altered":       {func(m map[string]any) { m["action"] = "CREATE" }, false, "a field that erasure " + erasure + " did not replace was altered: the entry no longer hashes to its leaf 10"},
		"a kept data member":       {func(m map[string]any) { m["data"].(map[string]any)["n"] = 99 }, false, "did not replace was altered"},
		"a kept identifying field": {func(m map[string]any) { m["user_id"] = "mallory" }, false, "did not replace was altered"},
		"an erased field reopened": {func(m map[string]any) { m[tlog.ErasureMember].(map[string]any)["fields"] = map[string]any{} }, false, ""},
		"a kept field called erased": {func(m map[string]any) {
			// user_id opened by its commitment (which the server knows)
			// and served altered: the records of the erasure name only
			// data and display_name.
			var orig map[string]any
			_ = json.Unmarshal(f.items[10], &orig)
			ob, _ := json.Marshal(orig)
			orig["user_id"] = "x"
			nb, _ := json.Marshal(orig)
			of, _ := tlog.OpenErased(ob, nb, salt)
			m[tlog.ErasureMember].(map[string]any)["fields"].(tlog.ErasedFields).Fields["user_id"] = of.Fields["user_id"]
			m["user_id"] = "mallory"
		}, false, "line 11 says that erasure " + erasure + " replaced its user_id, which no signed record of an erasure of its leaf names"},
	} {
		rep := run(t, export(tc.alter), verify.Config{Keys: f.keys})
		var out strings.Builder
		rep.Write(&out)
		if rep.OK() != tc.ok || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: want ok=%v and %q:\n%s", name, tc.ok, tc.want, out.String())
		}
	}
}
