package deliver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// Proof with every delivery: with the logs (ProveWith), a batch to a JSON
// destination waits until its entries are in their organization's log and
// a checkpoint covers them, each entry line carries its leaf_index, and
// each POST ends with a line per log it covers (BatchItem): the leaves
// [first_leaf, last_leaf] it covers, the checkpoint, the consistency proof
// from the checkpoint of this log's previous batch, and the hashes of the
// subtrees of every other leaf of the checkpoint's tree (those before
// first_leaf, those in the range the destination's filter left out, those
// after last_leaf). A receiver hashes the entries it got, adds the
// subtrees, and must get the checkpoint's root: every entry is in the log,
// and the next batch must start at last_leaf+1 (auditrail receive
// --verify reports a gap or a duplicate by leaf).

// Logs is what a deliverer reads of the tamper-evidence logs.
type Logs interface {
	LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error)
	LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error)
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error)
}

// ProveWith makes JSON batches carry their proof (see BatchItem). Call it
// before Run.
func (d *Deliverer) ProveWith(l Logs) { d.logs = l }

// BatchItem is the last line (one per log) of a JSON POST with proofs.
type BatchItem struct {
	Type           string   `json:"type"` // "batch"
	OrganizationID string   `json:"organization_id"`
	Log            string   `json:"log"` // audit_logs, tool_executions
	FirstLeaf      int64    `json:"first_leaf"`
	LastLeaf       int64    `json:"last_leaf"`
	Size           int64    `json:"size"`
	Checkpoint     string   `json:"checkpoint"`
	From           int64    `json:"consistency_from"`
	Consistency    []string `json:"consistency"`
	Nodes          []Node   `json:"nodes"`
}

// Node is a subtree of the checkpoint's tree: level, index (it covers the
// leaves [index·2^level, (index+1)·2^level)) and hash (standard base64).
type Node struct {
	Level int    `json:"level"`
	Index int64  `json:"index"`
	Hash  string `json:"hash"`
}

// BatchType is BatchItem's type.
const BatchType = "batch"

var logKinds = [2]auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions}

func logName(k auditstore.LogKind) string {
	if k == auditstore.LogExecutions {
		return "tool_executions"
	}
	return "audit_logs"
}

// proofMark is where a destination's proofs stand in one log: the next
// leaf its batches cover and the size of the last checkpoint sent (kept
// in the delivery bucket, ProofKey).
type proofMark struct {
	Next int64 `json:"next_leaf"`
	Size int64 `json:"checkpoint_size"`
}

// ProofKey is the delivery bucket's key of a destination generation's
// proof marks.
func ProofKey(id uuid.UUID, gen int) string { return fmt.Sprintf("proof.%s.%d", id, gen) }

// proves says whether the destination's batches carry proofs.
func (w *worker) proves(sp *spec) bool {
	return w.d.logs != nil && sp.Format != destination.FormatOCSF && sp.Type != destination.DestSplunkHEC
}

// loadMarks reads the generation's proof marks (none: start fresh).
func (w *worker) loadMarks() {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	w.marks = [2]proofMark{{Next: -1}, {Next: -1}}
	e, err := w.d.kv.Get(ctx, ProofKey(w.id, w.gen))
	if err != nil {
		return
	}
	var m [2]proofMark
	if json.Unmarshal(e.Value(), &m) == nil {
		w.marks = m
	}
}

func (w *worker) saveMarks() {
	b, _ := json.Marshal(w.marks)
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	if _, err := w.d.kv.Put(ctx, ProofKey(w.id, w.gen), b); err != nil && w.ctx.Err() == nil {
		w.log.Warn("deliver: proof marks not saved (the next batch's range may overlap)", "err", err)
	}
}

// leafOf is the log and leaf of a message once its entry is sequenced.
type leafOf struct {
	kind auditstore.LogKind
	leaf int64
	ok   bool
}

// awaitLeaves waits until the entries of msgs are in their logs and a
// checkpoint covers them, at most ProofWait (then the entries still
// missing go without a leaf: an event the store refused, or a log role
// that does not run). It keeps the batch in progress meanwhile. It
// returns each message's leaf and the checkpoint of each log, or false
// when the worker must stop.
func (w *worker) awaitLeaves(sp *spec, msgs []jetstream.Msg) ([]leafOf, [2]auditstore.Checkpoint, bool) {
	out := make([]leafOf, len(msgs))
	var cps [2]auditstore.Checkpoint
	ids := [2][]uuid.UUID{}
	events := make([]uuid.UUID, len(msgs)) // uuid.Nil: not an entry
	for i, m := range msgs {
		_, kind, ok := schemas.ParseEventSubject(m.Subject())
		id, err := uuid.Parse(m.Headers().Get(schemas.HeaderMsgID))
		if !ok || err != nil || kind != schemas.KindAudit && kind != schemas.KindExecution {
			continue
		}
		k := auditstore.LogAudit
		if kind == schemas.KindExecution {
			k = auditstore.LogExecutions
		}
		out[i], events[i] = leafOf{kind: k}, id
		ids[k] = append(ids[k], id)
	}
	deadline := time.Now().Add(w.d.cfg.ProofWait)
	lastProgress := time.Now()
	for {
		found := [2]map[uuid.UUID]int64{}
		complete := true
		for _, k := range logKinds {
			if len(ids[k]) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(w.ctx, w.d.cfg.RequestTimeout)
			m, err := w.d.logs.LeafIndexes(ctx, sp.OrgID, k, ids[k])
			var cp auditstore.Checkpoint
			var ok bool
			if err == nil {
				cp, ok, err = w.d.logs.LatestCheckpoint(ctx, sp.OrgID, k)
			}
			cancel()
			if err != nil {
				w.log.Warn("deliver: the log cannot be read", "err", err)
				complete = false
				continue
			}
			found[k], cps[k] = m, cp
			for _, id := range ids[k] {
				if l, in := m[id]; !in || !ok || l >= cp.Size {
					complete = false
				}
			}
		}
		if complete || !time.Now().Before(deadline) || w.ctx.Err() != nil {
			for i, id := range events {
				if id == uuid.Nil {
					continue
				}
				if l, in := found[out[i].kind][id]; in && l < cps[out[i].kind].Size {
					out[i].leaf, out[i].ok = l, true
				}
			}
			if !complete && w.ctx.Err() == nil {
				w.log.Warn("deliver: entries not covered by a checkpoint within the proof wait: delivered without their leaves", "wait", w.d.cfg.ProofWait)
			}
			return out, cps, w.ctx.Err() == nil
		}
		if time.Since(lastProgress) > w.d.cfg.AckWait/4 {
			for _, m := range msgs {
				_ = m.InProgress()
			}
			lastProgress = time.Now()
		}
		if cur := w.spec.Load(); cur.Paused || cur.Generation != w.gen {
			return nil, cps, false
		}
		select {
		case <-w.ctx.Done():
			return nil, cps, false
		case <-time.After(w.d.cfg.ProofPoll):
		}
	}
}

// batchLines are the batch lines of a chunk whose delivered entries of
// each log are at leaves (those of a log, in any order).
func (w *worker) batchLines(org uuid.UUID, leaves [2][]int64, cps [2]auditstore.Checkpoint) ([][]byte, [2]proofMark, error) {
	marks := w.marks
	var out [][]byte
	for _, k := range logKinds {
		d := slices.Clone(leaves[k])
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		d = slices.Compact(d)
		cp := cps[k]
		first := marks[k].Next
		if first < 0 || first > d[0] {
			first = d[0]
		}
		last := d[len(d)-1]
		if cp.Size <= last {
			continue // not covered (the proof wait ran out): no line
		}
		var ids []tlog.Node
		ids = append(ids, tlog.Pieces(0, first)...)
		next := first
		for _, l := range d {
			if l < first {
				continue // delivered again (a range already proved): the receiver says so
			}
			ids = append(ids, tlog.Pieces(next, l)...)
			next = l + 1
		}
		ids = append(ids, tlog.Pieces(last+1, cp.Size)...)
		idx := make([]int64, len(ids))
		for i, n := range ids {
			idx[i] = n.StoredIndex()
		}
		ctx, cancel := context.WithTimeout(w.ctx, w.d.cfg.RequestTimeout)
		hs, err := w.d.logs.ReadLogHashes(ctx, org, k, idx)
		var proof sumtlog.TreeProof
		from := marks[k].Size
		if err == nil && from > 0 && from < cp.Size {
			proof, err = sumtlog.ProveTree(cp.Size, from, auditstore.LogHashReader(ctx, w.d.logs, org, k))
		}
		cancel()
		if err != nil {
			return nil, marks, fmt.Errorf("proof of %s leaves %d..%d: %w", logName(k), first, last, err)
		}
		if from <= 0 || from > cp.Size {
			from = 0
		}
		item := BatchItem{Type: BatchType, OrganizationID: org.String(), Log: logName(k), FirstLeaf: first, LastLeaf: last, Size: cp.Size,
			Checkpoint: string(cp.Note), From: from, Consistency: []string{}, Nodes: make([]Node, len(ids))}
		for _, h := range proof {
			item.Consistency = append(item.Consistency, base64.StdEncoding.EncodeToString(h[:]))
		}
		for i, n := range ids {
			item.Nodes[i] = Node{Level: n.Level, Index: n.Index, Hash: base64.StdEncoding.EncodeToString(hs[i][:])}
		}
		b, err := json.Marshal(item)
		if err != nil {
			return nil, marks, err
		}
		out = append(out, b)
		marks[k] = proofMark{Next: last + 1, Size: cp.Size}
	}
	return out, marks, nil
}
