package verify

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/tlog"
)

// The entries that left a log on purpose (internal/tlog/lifecycle.go): an
// export covers each run of expired leaves with an "expired" line (the
// hashes of the subtrees over them) and carries the newest expiry record
// of the log with its inclusion proof in a signed checkpoint of the audit
// log. The verifier's rules:
//
//   - the record's checkpoint opens with the trusted keys and is of the
//     same organization's audit log; the record's leaf is in it (the
//     inclusion proof verifies); its data holds an expiry record of this
//     log. Otherwise the record is a problem and authorises nothing.
//   - every expired leaf is below the record's below_leaf (a run beyond it,
//     or any run without a record, is a deletion: KindMissing);
//   - an expired leaf has no entry in the export (KindDuplicate);
//   - at least the record's kept entries are in the export below
//     below_leaf (fewer: held entries were deleted: KindMissing);
//   - the runs' hashes stand for their leaves in the root: a wrong hash
//     fails the root like an altered entry.

// KindLifecycle: a lifecycle line that does not verify.
const KindLifecycle = "lifecycle"

// lifecycleLine is an "expired" or "record" line of the export.
type lifecycleLine struct {
	line   int64
	member string
	raw    json.RawMessage
}

// lifecycleOf returns the member and value of a line {"expired": …} or
// {"record": …}: one member, which no leaf covers.
func lifecycleOf(e tlog.Entry, text []byte) (string, json.RawMessage, bool) {
	if e.Members != 0 || e.Uncovered != 1 {
		return "", nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(text, &m) != nil || len(m) != 1 {
		return "", nil, false
	}
	for _, k := range []string{tlog.ExpiredLineMember, tlog.RecordLineMember} {
		if raw, ok := m[k]; ok {
			return k, raw, true
		}
	}
	return "", nil, false
}

// expiredRun is a verified-in-shape run of expired leaves.
type expiredRun struct {
	line        int64
	first, last int64
}

// lifecycle is what the export's lifecycle lines say.
type lifecycle struct {
	runs  []expiredRun
	nodes map[tlog.Node]tlog.Hash
	// expired counts the leaves in runs.
	expired int64
	// record is the newest verified expiry record of the log (nil: none),
	// at leaf recordLeaf of the audit log.
	record     *tlog.LifecycleRecord
	recordLeaf int64
	// erasures are the leaf ranges that verified erasure records of this
	// log name, by erasure id; erasedFields the fields they say the
	// erasure replaced (the items' names).
	erasures     map[string][][2]int64
	erasedFields map[string]map[string]bool
}

// erasedLine is an entry served with its erasure member: its leaf is the
// original leaf hash the member gives.
type erasedLine struct {
	line    int64
	index   int64
	erasure string
	// committed: the entry's leaf is of version 2, and every field the
	// erasure did not replace was checked against it; fields are those it
	// replaced.
	committed bool
	fields    []string
}

// erasureOf reads an entry's erasure member (ok false: it has none).
func erasureOf(text []byte) (tlog.ErasureRef, tlog.Hash, bool, error) {
	var m struct {
		Erasure *tlog.ErasureRef `json:"erasure"`
	}
	if err := json.Unmarshal(text, &m); err != nil {
		return tlog.ErasureRef{}, tlog.Hash{}, false, err
	}
	if m.Erasure == nil {
		return tlog.ErasureRef{}, tlog.Hash{}, false, nil
	}
	if _, err := uuid.Parse(m.Erasure.ID); err != nil {
		return tlog.ErasureRef{}, tlog.Hash{}, false, fmt.Errorf("id %q is not a uuid", m.Erasure.ID)
	}
	h, err := decodeHash(m.Erasure.LeafHash)
	if err != nil {
		return tlog.ErasureRef{}, tlog.Hash{}, false, fmt.Errorf("leaf_hash: %w", err)
	}
	return *m.Erasure, h, true, nil
}

// readLifecycle checks the lifecycle lines against the checkpoint cp.
func (v *verifier) readLifecycle(cp tlog.Checkpoint) *lifecycle {
	lines := v.col.lifecycle
	if len(lines) == 0 {
		return nil
	}
	slices.SortFunc(lines, func(a, b lifecycleLine) int { return int(a.line - b.line) })
	_, org, kind, ok := tlog.ParseOrigin(cp.Origin)
	if !ok {
		v.add(KindLifecycle, -1, 0, "the checkpoint's origin %q names no organization's log: its lifecycle lines cannot be checked", cp.Origin)
		return nil
	}
	logName := tlog.LogNameAudit
	if kind == tlog.KindExecutions {
		logName = tlog.LogNameExecutions
	}
	lc := &lifecycle{nodes: map[tlog.Node]tlog.Hash{}}
	for _, l := range lines {
		switch l.member {
		case tlog.RecordLineMember:
			rec, leaf, err := v.checkRecord(l.raw, org)
			if err != nil {
				v.add(KindLifecycle, -1, l.line, "line %d: the expiry record does not verify: %s: it authorises nothing", l.line, err)
				continue
			}
			if rec.Log != logName {
				continue
			}
			if rec.Type == tlog.RecordErasure {
				if lc.erasures == nil {
					lc.erasures = map[string][][2]int64{}
				}
				lc.erasures[rec.Erasure] = append(lc.erasures[rec.Erasure], rec.Leaves...)
				if lc.erasedFields == nil {
					lc.erasedFields = map[string]map[string]bool{}
				}
				if lc.erasedFields[rec.Erasure] == nil {
					lc.erasedFields[rec.Erasure] = map[string]bool{}
				}
				for _, f := range rec.Fields {
					if f == "execution_error" {
						f = "error" // the column, as the items name it
					}
					lc.erasedFields[rec.Erasure][f] = true
				}
				continue
			}
			if lc.record == nil || leaf > lc.recordLeaf {
				lc.record, lc.recordLeaf = &rec, leaf
			}
		case tlog.ExpiredLineMember:
			run, err := lc.addRun(l, cp.Size)
			if err != nil {
				v.add(KindMalformed, -1, l.line, "line %d: not a run of expired leaves: %s", l.line, err)
				continue
			}
			lc.runs = append(lc.runs, run)
			lc.expired += run.last - run.first + 1
		}
	}
	return lc
}

// addRun reads an expired line and adds its subtrees.
func (lc *lifecycle) addRun(l lifecycleLine, size int64) (expiredRun, error) {
	var r tlog.ExpiredRun
	if err := json.Unmarshal(l.raw, &r); err != nil {
		return expiredRun{}, err
	}
	if r.FirstLeaf < 0 || r.LastLeaf < r.FirstLeaf || r.LastLeaf >= size {
		return expiredRun{}, fmt.Errorf("leaves %d..%d are not within the checkpoint's %d", r.FirstLeaf, r.LastLeaf, size)
	}
	for _, o := range lc.runs {
		if r.FirstLeaf <= o.last && o.first <= r.LastLeaf {
			return expiredRun{}, fmt.Errorf("leaves %d..%d overlap the run of line %d", r.FirstLeaf, r.LastLeaf, o.line)
		}
	}
	pieces := tlog.Pieces(r.FirstLeaf, r.LastLeaf+1)
	if len(r.Hashes) != len(pieces) {
		return expiredRun{}, fmt.Errorf("%d hashes for leaves %d..%d, which %d subtrees cover", len(r.Hashes), r.FirstLeaf, r.LastLeaf, len(pieces))
	}
	for i, p := range pieces {
		h, err := decodeHash(r.Hashes[i])
		if err != nil {
			return expiredRun{}, fmt.Errorf("hash %d: %w", i, err)
		}
		lc.nodes[p] = h
	}
	return expiredRun{line: l.line, first: r.FirstLeaf, last: r.LastLeaf}, nil
}

func decodeHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, errors.New("not the base64 of 32 bytes")
	}
	copy(h[:], b)
	return h, nil
}

// checkRecord verifies a record line: its checkpoint (trusted keys, the
// organization's audit log), the record's inclusion in it and its data.
func (v *verifier) checkRecord(raw json.RawMessage, org uuid.UUID) (tlog.LifecycleRecord, int64, error) {
	var rp tlog.RecordProof
	if err := json.Unmarshal(raw, &rp); err != nil {
		return tlog.LifecycleRecord{}, 0, err
	}
	rcp, _, err := tlog.Open([]byte(rp.Checkpoint), v.cfg.Keys)
	if err != nil {
		return tlog.LifecycleRecord{}, 0, fmt.Errorf("its checkpoint: %s", Describe(err))
	}
	if _, rorg, rkind, ok := tlog.ParseOrigin(rcp.Origin); !ok || rorg != org || rkind != tlog.KindAudit {
		return tlog.LifecycleRecord{}, 0, fmt.Errorf("its checkpoint is of another log (origin %q), not this organization's audit log", rcp.Origin)
	}
	e, err := tlog.ParseEntry(nil, rp.Entry)
	if err != nil {
		return tlog.LifecycleRecord{}, 0, fmt.Errorf("the entry: %w", err)
	}
	proof := make([]tlog.Hash, len(rp.Proof))
	for i, s := range rp.Proof {
		if proof[i], err = decodeHash(s); err != nil {
			return tlog.LifecycleRecord{}, 0, fmt.Errorf("proof hash %d: %w", i, err)
		}
	}
	if rp.LeafIndex < 0 || rp.LeafIndex >= rcp.Size {
		return tlog.LifecycleRecord{}, 0, fmt.Errorf("leaf %d is not in its checkpoint of %d leaves", rp.LeafIndex, rcp.Size)
	}
	if err := tlog.VerifyInclusion(rcp.Size, rcp.Root, rp.LeafIndex, e.Leaf, proof); err != nil {
		return tlog.LifecycleRecord{}, 0, fmt.Errorf("leaf %d is not in the signed audit log (the entry was altered, or the proof is not of it): %w", rp.LeafIndex, err)
	}
	var item struct {
		OrganizationID string `json:"organization_id"`
	}
	if json.Unmarshal(rp.Entry, &item) != nil || item.OrganizationID != org.String() {
		return tlog.LifecycleRecord{}, 0, errors.New("the entry is of another organization")
	}
	rec, err := tlog.ParseLifecycleRecord(rp.Entry)
	if err != nil {
		return tlog.LifecycleRecord{}, 0, err
	}
	return rec, rp.LeafIndex, nil
}

// check applies the rules to the placed entries: owner[i] != 0 when leaf i
// has an entry.
func (lc *lifecycle) check(v *verifier, owner []int32) {
	lc.checkErased(v)
	if len(lc.runs) == 0 {
		if lc.record != nil && lc.record.Expired > 0 {
			v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s (expiry record at leaf %d of the audit log); none is missing from this export",
				lc.noteText(0), lc.recordLeaf))
		}
		return
	}
	if lc.record == nil {
		for _, r := range lc.runs {
			v.add(KindMissing, r.first, r.line, "leaves %d..%d are marked expired, but no signed expiry record of this log says so: %d entries deleted", r.first, r.last, r.last-r.first+1)
		}
		return
	}
	below := lc.record.BelowLeaf
	for _, r := range lc.runs {
		if r.last >= below {
			v.add(KindMissing, max(r.first, below), r.line, "leaves %d..%d are marked expired beyond the expiry record's horizon (leaf %d, recorded at leaf %d of the audit log): deleted",
				max(r.first, below), r.last, below, lc.recordLeaf)
		}
	}
	var present int64
	for _, o := range owner[:min(int64(len(owner)), below)] {
		if o > 0 {
			present++
		}
	}
	if present < lc.record.Kept {
		v.add(KindMissing, -1, 0, "the expiry record at leaf %d of the audit log kept %d entries below leaf %d and the export has %d: %d held entries were deleted",
			lc.recordLeaf, lc.record.Kept, below, present, lc.record.Kept-present)
	}
	v.rep.Notes = append(v.rep.Notes, lc.noteText(lc.expired)+fmt.Sprintf(" (expiry record at leaf %d of the audit log, entries persisted before %s)",
		lc.recordLeaf, lc.record.Cutoff.UTC().Format(tlog.TimeFormat)))
}

// noteText says how many entries expired under which retention.
func (lc *lifecycle) noteText(n int64) string {
	return fmt.Sprintf("%s expired under the organization's retention of %s", plural(n, "entry"), retentionWords(lc.record.Retention))
}

// retentionWords writes "400d" as "400 days", "36h" as "36 hours".
func retentionWords(s string) string {
	for suffix, unit := range map[string]string{"d": "day", "h": "hour", "m": "minute"} {
		if n, err := strconv.ParseInt(strings.TrimSuffix(s, suffix), 10, 64); err == nil && strings.HasSuffix(s, suffix) {
			if n == 1 {
				return "1 " + unit
			}
			return strconv.FormatInt(n, 10) + " " + unit + "s"
		}
	}
	return s
}

// namesField reports whether a verified erasure record that names leaf
// says its erasure replaced field f (an entry erased twice shows the
// fields of both erasures replaced, and the id of the later).
func (lc *lifecycle) namesField(leaf int64, f string) bool {
	for id, rs := range lc.erasures {
		if !lc.erasedFields[id][f] {
			continue
		}
		for _, r := range rs {
			if r[0] <= leaf && leaf <= r[1] {
				return true
			}
		}
	}
	return false
}

// checkErased checks that a verified erasure record names each erased
// entry's leaf, and notes how many each erasure changed.
func (lc *lifecycle) checkErased(v *verifier) {
	counts := map[string]int64{}
	opaque := map[string]int64{} // erased entries of version 1: no field checked
	for _, e := range v.col.erased {
		named := false
		for _, r := range lc.erasures[e.erasure] {
			if r[0] <= e.index && e.index <= r[1] {
				named = true
				break
			}
		}
		if !named {
			v.add(KindAltered, e.index, e.line, "line %d claims that erasure %s rewrote leaf %d, but no signed erasure record of this log names it: the entry was altered",
				e.line, e.erasure, e.index)
			continue
		}
		if f := slices.IndexFunc(e.fields, func(f string) bool { return !lc.namesField(e.index, f) }); f >= 0 {
			v.add(KindAltered, e.index, e.line, "line %d says that erasure %s replaced its %s, which no signed record of an erasure of its leaf names: the field was altered",
				e.line, e.erasure, e.fields[f])
			continue
		}
		counts[e.erasure]++
		if !e.committed {
			opaque[e.erasure]++
		}
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		how := "every field the erasure did not replace checked against the entry's leaf"
		switch n := opaque[id]; {
		case n == counts[id]:
			how = "each placed by its original leaf hash: their leaves are of version 1, so their other fields are not checked"
		case n > 0:
			how = fmt.Sprintf("every field the erasure did not replace checked, except in %s of version 1, placed by their original leaf hash", plural(n, "entry"))
		}
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s erased by erasure %s (their identifying fields replaced by a pseudonym after a signed record named their leaves; %s)",
			plural(counts[id], "entry"), id, how))
	}
}
