package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/auditrail/auditrail/internal/tlog"
)

// maxMissing bounds how many more leaves than entries a checkpoint may
// cover before the verifier stops placing entries (its memory is per leaf).
const maxMissing = 1 << 24

type verifier struct {
	cfg Config
	rep *Report
	col *collector
	ra  io.ReaderAt
	lc  *lifecycle // the lifecycle lines, nil without any
}

// expiredLeaf marks a leaf of an expired run in place's owners.
const expiredLeaf = -1

// root is the tree hash of leaves, the expired runs' subtrees standing in
// for their leaves; false when a subtree reaches beyond leaves (a prefix
// of the log that it does not fit).
func (v *verifier) root(leaves []tlog.Hash) (tlog.Hash, bool) {
	if v.lc == nil || len(v.lc.nodes) == 0 {
		return tlog.ParallelRootOf(leaves, v.cfg.Workers), true
	}
	n := int64(len(leaves))
	nodes := v.lc.nodes
	if n < v.rep.Checkpoint.Size {
		nodes = map[tlog.Node]tlog.Hash{}
		for nd, h := range v.lc.nodes {
			lo, hi := nd.Range()
			if lo >= n {
				continue
			}
			if hi > n {
				return tlog.Hash{}, false
			}
			nodes[nd] = h
		}
	}
	return tlog.RootWithNodes(leaves, nodes), true
}

func (v *verifier) add(kind string, leaf, line int64, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, Problem{Kind: kind, Leaf: leaf, Line: int(line), Message: fmt.Sprintf(format, args...)})
}

// extra is a further checkpoint the entries must match: the export's own
// when --checkpoint names another, or the kept one.
type extra struct {
	name string
	cp   tlog.Checkpoint
	kept bool
}

func (v *verifier) run() error {
	cps := v.col.checkpoints
	slices.SortFunc(cps, func(a, b checkpointLine) int { return int(a.line - b.line) })
	var embedded []byte
	embeddedName := ""
	if len(cps) > 0 {
		last := cps[len(cps)-1]
		for _, c := range cps[:len(cps)-1] {
			v.add(KindOrder, -1, c.line, "line %d carries a checkpoint but is not the last line: the export was edited (only the last line may be its checkpoint)", c.line)
		}
		if last.line != v.col.lastLine {
			v.add(KindOrder, -1, last.line, "line %d carries the checkpoint but lines follow it: lines were appended to the export after it was made", last.line)
		}
		embedded, embeddedName = last.note, fmt.Sprintf("the export's checkpoint (line %d)", last.line)
	}
	mainNote, mainName := v.cfg.Checkpoint, "the checkpoint"
	if mainNote == nil {
		mainNote, mainName = embedded, embeddedName
	}
	if mainNote == nil {
		return ErrNoCheckpoint
	}
	cp, key, err := tlog.Open(mainNote, v.cfg.Keys)
	if err != nil {
		v.add(KindCheckpoint, -1, 0, "%s: %s", mainName, Describe(err))
		return nil
	}
	v.rep.Checkpoint, v.rep.Key = cp, key
	v.witnessed(mainNote, mainName)
	v.pending(cp)
	lc := v.readLifecycle(cp)
	if lc == nil && len(v.col.erased) > 0 {
		lc = &lifecycle{nodes: map[tlog.Node]tlog.Hash{}}
	}
	var extras []extra
	if v.cfg.Checkpoint != nil && embedded != nil {
		if ecp, ok := v.open(embedded, embeddedName, cp); ok && ecp.Size <= cp.Size && ecp != cp {
			extras = append(extras, extra{name: embeddedName, cp: ecp})
		}
	}
	if v.cfg.Since != nil {
		if kcp, ok := v.open(v.cfg.Since, "the kept checkpoint", cp); ok {
			v.rep.Since = &kcp
			if kcp.Size > cp.Size {
				v.add(KindRolledBack, -1, 0, "rolled back: the kept checkpoint of %s covers %d entries, the log's checkpoint of %s only %d: %d entries were removed from the log since, or it was rebuilt",
					kcp.Time.Format(tlog.TimeFormat), kcp.Size, cp.Time.Format(tlog.TimeFormat), cp.Size, kcp.Size-cp.Size)
			} else {
				extras = append(extras, extra{name: "the kept checkpoint", cp: kcp, kept: true})
			}
		}
	}
	if v.col.entries >= math.MaxInt32 {
		return fmt.Errorf("verify: %d entries: more than this verifier places (%d)", v.col.entries, math.MaxInt32-1)
	}
	expired := int64(0)
	if lc != nil {
		expired = lc.expired
	}
	if cp.Size > v.col.entries+expired+maxMissing {
		v.add(KindMissing, -1, 0, "the checkpoint covers %d leaves and the export has %d entries: at least %d entries are missing (deleted, or this is not the export of this log)",
			cp.Size, v.col.entries, cp.Size-v.col.entries)
		for _, chunk := range v.col.records {
			for _, r := range chunk {
				if r.index < cp.Size {
					v.rep.Unchecked++
				}
			}
		}
		return nil
	}
	v.place(cp, extras, lc)
	return nil
}

// pending sorts the entries exported with leaf_index null: those stored
// (created_time) more than PendingGrace before the checkpoint should be in
// its log; the others are counted.
func (v *verifier) pending(cp tlog.Checkpoint) {
	grace := v.cfg.PendingGrace
	if grace <= 0 {
		grace = DefaultPendingGrace
	}
	v.rep.Pending = v.col.morePending
	if !cp.SealedUntil.IsZero() {
		v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("the checkpoint seals the log up to %s (sealed_until): every entry stored by then is at a leaf below its size",
			cp.SealedUntil.Format(tlog.TimeFormat)))
	}
	for _, p := range v.col.pending {
		if !cp.SealedUntil.IsZero() && !p.created.IsZero() && !p.created.After(cp.SealedUntil) {
			v.add(KindInserted, -1, p.line, "line %d%s is not in the log (leaf_index null) but was stored at %s, at or before the checkpoint's sealed_until %s: every entry stored by then is in the log, so it was inserted into the store behind the log's back",
				p.line, eventSuffix(p.event), p.created.UTC().Format(tlog.TimeFormat), cp.SealedUntil.Format(tlog.TimeFormat))
			continue
		}
		if p.created.IsZero() || p.created.Before(cp.Time.Add(-grace)) {
			when := "without a readable created_time"
			if !p.created.IsZero() {
				when = "stored at " + p.created.UTC().Format(tlog.TimeFormat) + ", before the checkpoint of " + cp.Time.Format(tlog.TimeFormat)
			}
			v.add(KindInserted, -1, p.line, "line %d%s is not in the log (leaf_index null) and was %s: inserted into the store behind the log's back (or the log is not being sequenced)",
				p.line, eventSuffix(p.event), when)
			continue
		}
		v.rep.Pending++
	}
}

// open opens a further checkpoint of the same log as main.
func (v *verifier) open(msg []byte, name string, main tlog.Checkpoint) (tlog.Checkpoint, bool) {
	c, _, err := tlog.Open(msg, v.cfg.Keys)
	if err != nil {
		v.add(KindCheckpoint, -1, 0, "%s: %s", name, Describe(err))
		return c, false
	}
	if c.Origin != main.Origin {
		v.add(KindInconsistent, -1, 0, "%s is of another log (origin %q, not %q)", name, c.Origin, main.Origin)
		return c, false
	}
	return c, true
}

// Describe says what an error of tlog.Open (a checkpoint that does not
// open with the trusted keys) means.
func Describe(err error) string {
	msg := strings.TrimPrefix(err.Error(), "tlog: ")
	switch {
	case errors.Is(err, tlog.ErrUnknownKey):
		return strings.Replace(msg, "an unknown key", "unknown key", 1) + ": the signer is not pinned, no key of the keys file made it (a forged checkpoint, a log rewritten and signed again with another key, or a keys file older than the key)"
	case errors.Is(err, tlog.ErrBadSignature):
		return msg + ": the checkpoint was altered after it was signed"
	case errors.Is(err, tlog.ErrKeyNotValid):
		return msg + ": a retired key signed after its retirement (stolen?) or a key before its start"
	}
	return msg
}

// place puts every entry at its leaf, reports missing and duplicated
// leaves, and checks the roots.
func (v *verifier) place(cp tlog.Checkpoint, extras []extra, lc *lifecycle) {
	size := cp.Size
	all := newRecords(v.col.records)
	leaves := make([]tlog.Hash, size)
	owner := make([]int32, size) // 1 + global number of the record, 0: no entry, expiredLeaf
	dups := map[int64][]int32{}
	if lc != nil {
		for _, r := range lc.runs {
			for i := r.first; i <= r.last; i++ {
				owner[i] = expiredLeaf
			}
		}
	}
	v.lc = lc
	g := -1
	for _, chunk := range v.col.records {
		for _, r := range chunk {
			g++
			v.placeOne(r, g, size, leaves, owner, dups)
		}
	}
	missing, firstBad := v.missing(owner)
	if lc != nil {
		lc.check(v, owner)
	}
	for idx := range dups {
		firstBad = min(firstBad, idx)
	}
	resolved := false
	if len(dups) == 1 && missing == 0 {
		for idx, claim := range dups {
			resolved = v.resolve(cp, leaves, all, idx, claim)
		}
	} else {
		for idx, claim := range dups {
			v.add(KindDuplicate, idx, all.at(claim[0]).line, "%d entries claim leaf %d (%s): an entry was inserted or copied; at most one of them is in the log",
				len(claim), idx, v.claimants(all, claim))
		}
	}
	keptOK := false
	intact, intactName := int64(0), "" // leaves 0..intact-1 match a further checkpoint
	for _, x := range extras {
		if x.cp.Size > firstBad {
			continue // its leaves are not all there: said above
		}
		root, ok := v.root(slices.Clone(leaves[:x.cp.Size]))
		if !ok {
			v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s (size %d) cannot be checked from the export: expired leaves below it are covered by subtrees that reach beyond it (verifying online checks the consistency proof)", x.name, x.cp.Size))
			continue
		}
		switch {
		case root == x.cp.Root:
			keptOK = keptOK || x.kept
			if x.cp.Size > intact {
				intact, intactName = x.cp.Size, x.name
			}
		case x.kept:
			v.add(KindInconsistent, -1, 0, "not consistent with the kept checkpoint of %s: the first %d entries do not hash to its root: an entry before leaf %d was altered, replaced or reordered since, or the log was rewritten",
				x.cp.Time.Format(tlog.TimeFormat), x.cp.Size, x.cp.Size)
		default:
			v.add(KindRoot, -1, 0, "the first %d entries do not hash to the root of %s", x.cp.Size, x.name)
		}
	}
	if resolved {
		v.rep.RootVerified = true
		return
	}
	if missing > 0 || len(dups) > 0 {
		// No root over the entries: say what a smaller checkpoint proves
		// and count the entries nothing checked (online, their inclusion
		// proofs do).
		if intact > 0 {
			v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("the first %s (leaves 0..%d) match %s: none of them was altered", plural(intact, "entry"), intact-1, intactName))
		}
		for _, o := range owner[intact:] {
			if o != 0 {
				v.rep.Unchecked++
			}
		}
		return
	}
	root, _ := v.root(leaves)
	v.rep.RootVerified = root == cp.Root
	if !v.rep.RootVerified {
		where := ""
		if keptOK && v.rep.Since.Size > 0 {
			where = fmt.Sprintf("; the first %d entries match the kept checkpoint, so the change is at leaf %d or later", v.rep.Since.Size, v.rep.Since.Size)
		}
		v.add(KindRoot, -1, 0, "root differs: the entries were reordered or altered: the %d entries at leaves 0..%d do not hash to the checkpoint's root. "+
			"An entry's field was changed, an entry was replaced, or two entries' contents were swapped; the root alone cannot tell which (verifying online checks each entry's inclusion proof)%s",
			size, size-1, where)
	}
}

// missing reports the runs of leaves without an entry and returns how
// many leaves they hold and the first of them (len(owner) when none).
func (v *verifier) missing(owner []int32) (total, first int64) {
	first = int64(len(owner))
	size := int64(len(owner))
	for i := int64(0); i < size; i++ {
		if owner[i] != 0 {
			continue
		}
		j := i
		for j+1 < size && owner[j+1] == 0 {
			j++
		}
		total += j - i + 1
		first = min(first, i)
		tail := ""
		if j == size-1 {
			tail = " (the tail of the log was truncated)"
		}
		if i == j {
			v.add(KindMissing, i, 0, "leaf %d missing: deleted%s", i, tail)
		} else {
			v.add(KindMissing, i, 0, "leaves %d..%d missing: %d consecutive entries deleted%s", i, j, j-i+1, tail)
		}
		i = j
	}
	return total, first
}

// resolve reports a leaf claimed by several entries, the only problem of
// the export: the claimant whose leaf gives the checkpoint's root is the
// log's, the others were inserted. It reports whether one gave the root.
func (v *verifier) resolve(cp tlog.Checkpoint, leaves []tlog.Hash, all records, idx int64, claim []int32) bool {
	if len(claim) <= 4 {
		for k, g := range claim {
			trial := slices.Clone(leaves)
			trial[idx] = all.at(g).leaf
			if root, _ := v.root(trial); root != cp.Root {
				continue
			}
			others := slices.Delete(slices.Clone(claim), k, k+1)
			verb := "were"
			if len(others) == 1 {
				verb = "was"
			}
			v.add(KindDuplicate, idx, all.at(others[0]).line, "%d entries claim leaf %d: line %d%s is the log's; %s %s inserted (or copied)",
				len(claim), idx, all.at(g).line, eventSuffix(v.eventOf(all.at(g))), v.claimants(all, others), verb)
			return true
		}
	}
	v.add(KindDuplicate, idx, all.at(claim[0]).line, "%d entries claim leaf %d (%s): an entry was inserted or copied, and none of them gives the checkpoint's root: the log's entry was altered too",
		len(claim), idx, v.claimants(all, claim))
	return false
}

func (v *verifier) claimants(all records, claim []int32) string {
	var parts []string
	for i, g := range claim {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(claim)-i))
			break
		}
		r := all.at(g)
		parts = append(parts, fmt.Sprintf("line %d%s", r.line, eventSuffix(v.eventOf(r))))
	}
	return strings.Join(parts, ", ")
}

// eventOf reads the event_id of r's line again ("" when the input cannot
// be read at an offset).
func (v *verifier) eventOf(r record) string {
	if v.ra == nil {
		return ""
	}
	buf := make([]byte, tlog.MaxEntryBytes+1)
	n, _ := v.ra.ReadAt(buf, r.off)
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	e, err := tlog.ParseEntry(nil, line)
	if err != nil {
		return ""
	}
	return e.EventID()
}

// placeOne puts record r (global number g) at its leaf.
func (v *verifier) placeOne(r record, g int, size int64, leaves []tlog.Hash, owner []int32, dups map[int64][]int32) {
	if r.index >= size {
		v.rep.Newer++
		if v.rep.NewerFirst < 0 || r.index < v.rep.NewerFirst {
			v.rep.NewerFirst = r.index
		}
		return
	}
	if owner[r.index] == 0 {
		owner[r.index], leaves[r.index] = int32(g+1), r.leaf
		return
	}
	if owner[r.index] == expiredLeaf {
		v.add(KindDuplicate, r.index, r.line, "line %d%s claims leaf %d, which the export marks expired: an entry was inserted, or the expired run is false",
			r.line, eventSuffix(v.eventOf(r)), r.index)
		return
	}
	if len(dups[r.index]) == 0 {
		dups[r.index] = append(dups[r.index], owner[r.index]-1)
	}
	dups[r.index] = append(dups[r.index], int32(g))
}

// records are the workers' chunks seen as one sequence.
type records struct {
	chunks [][]record
	starts []int // global number of each chunk's first record
}

func newRecords(chunks [][]record) records {
	rs := records{chunks: chunks, starts: make([]int, len(chunks))}
	n := 0
	for i, c := range chunks {
		rs.starts[i] = n
		n += len(c)
	}
	return rs
}

// at is record number g.
func (rs records) at(g int32) record {
	i, found := slices.BinarySearch(rs.starts, int(g))
	if !found {
		i--
	}
	return rs.chunks[i][int(g)-rs.starts[i]]
}

// witnessed checks the cosignatures of the witnesses given on the note:
// each by a given key must verify, and at least the quorum must.
func (v *verifier) witnessed(note []byte, name string) {
	if len(v.cfg.Witnesses) == 0 {
		return
	}
	got, problems, err := tlog.Cosignatures(note, v.cfg.Witnesses)
	if err != nil {
		v.add(KindWitness, -1, 0, "%s: the cosignatures cannot be read: %v", name, err)
		return
	}
	for _, p := range problems {
		v.add(KindWitness, -1, 0, "%s: %v", name, p)
	}
	for _, c := range got {
		v.rep.Cosigned = append(v.rep.Cosigned, c.Witness.Name)
	}
	if len(got) < v.cfg.WitnessQuorum {
		v.add(KindWitness, -1, 0, "%s is cosigned by %d of the witnesses given (%s), %d required (--witness-quorum): no quorum of witnesses saw this log at this size, so it may be a view shown to you alone",
			name, len(got), namesOr(v.rep.Cosigned, "none"), v.cfg.WitnessQuorum)
		return
	}
	v.rep.Notes = append(v.rep.Notes, fmt.Sprintf("%s is cosigned by %d of the %d witnesses given (%s): verified by %d witnesses",
		name, len(got), len(v.cfg.Witnesses), strings.Join(v.rep.Cosigned, ", "), len(got)))
}

func namesOr(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	return strings.Join(names, ", ")
}
