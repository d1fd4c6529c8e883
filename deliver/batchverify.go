package deliver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/tlog"
)

// BatchVerifier checks the proofs of JSON deliveries (BatchItem) as they
// arrive, one body after another: each batch line's checkpoint must be
// signed by a trusted key and be of the batch's log; the entries of the
// body in its range, hashed as the log hashes them, and its subtrees must
// make the checkpoint's root; its first leaf must follow the previous
// batch's last (else a gap or a duplicate, named by leaf); the tree
// before it must be the one the previous batch proved (else a fork), and
// its consistency proof from the previous checkpoint must verify.
type BatchVerifier struct {
	keys tlog.KeySet
	logs map[batchLog]*logState
}

type batchLog struct {
	org uuid.UUID
	log string
}

type logState struct {
	next     int64
	frontier []tlog.HashedNode
	size     int64
	root     tlog.Hash
}

// NewBatchVerifier verifies against keys (the audit_keys answer).
func NewBatchVerifier(keys tlog.KeySet) *BatchVerifier {
	return &BatchVerifier{keys: keys, logs: map[batchLog]*logState{}}
}

// Finding is one result of a body: Kind is "verified", "gap",
// "duplicate", "unproven" (entries without a leaf) or "fail".
type Finding struct {
	Kind    string
	Message string
}

func (f Finding) String() string { return f.Kind + ": " + f.Message }

// maxBatchLines bounds the batch lines of one body.
const maxBatchLines = 16

// Body checks one delivery body and returns what it found.
func (v *BatchVerifier) Body(body []byte) []Finding {
	var out []Finding
	fail := func(format string, args ...any) { out = append(out, Finding{"fail", fmt.Sprintf(format, args...)}) }
	type entry struct {
		leaf  tlog.Hash
		index int64
		event string
	}
	entries := map[batchLog][]entry{}
	var batches []BatchItem
	unproven := 0
	for n, line := range bodyLines(body) {
		var head struct {
			Type           string  `json:"type"`
			OrganizationID string  `json:"organization_id"`
			ExecutionID    *string `json:"execution_id"`
			LeafIndex      *int64  `json:"leaf_index"`
			EventID        string  `json:"event_id"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			fail("line %d is not JSON: %v", n, err)
			continue
		}
		switch head.Type {
		case BatchType:
			var b BatchItem
			if err := json.Unmarshal(line, &b); err != nil || len(batches) >= maxBatchLines {
				fail("line %d is not a batch line", n)
				continue
			}
			batches = append(batches, b)
			continue
		case "checkpoint":
			continue
		}
		org, err := uuid.Parse(head.OrganizationID)
		if err != nil {
			fail("line %d has no organization_id", n)
			continue
		}
		log := "audit_logs"
		if head.ExecutionID != nil {
			log = "tool_executions"
		}
		if head.LeafIndex == nil {
			unproven++
			continue
		}
		e, err := tlog.ParseEntry(nil, line)
		if err != nil {
			fail("line %d (event %q) cannot be hashed as the log hashes it: %v", n, head.EventID, err)
			continue
		}
		k := batchLog{org, log}
		entries[k] = append(entries[k], entry{leaf: e.Leaf, index: *head.LeafIndex, event: head.EventID})
	}
	if unproven > 0 {
		out = append(out, Finding{"unproven", fmt.Sprintf("%d entries came without a leaf_index (not in a checkpoint when delivered): not proven", unproven)})
	}
	covered := map[batchLog]bool{}
	for _, b := range batches {
		org, err := uuid.Parse(b.OrganizationID)
		k := batchLog{org, b.Log}
		if err != nil || (b.Log != "audit_logs" && b.Log != "tool_executions") {
			fail("a batch line names no log (organization %q, log %q)", b.OrganizationID, b.Log)
			continue
		}
		covered[k] = true
		name := fmt.Sprintf("organization %s %s", org, b.Log)
		cp, _, err := tlog.Open([]byte(b.Checkpoint), v.keys)
		if err != nil {
			fail("%s: the batch's checkpoint: %v", name, err)
			continue
		}
		if _, o, kind, ok := tlog.ParseOrigin(cp.Origin); !ok || o != org || kind.String() != b.Log || cp.Size != b.Size {
			fail("%s: the batch's checkpoint is of another log or size (%s, %d)", name, cp.Origin, cp.Size)
			continue
		}
		if b.FirstLeaf < 0 || b.LastLeaf < b.FirstLeaf || b.LastLeaf >= cp.Size {
			fail("%s: leaves %d..%d are not within the checkpoint of size %d", name, b.FirstLeaf, b.LastLeaf, cp.Size)
			continue
		}
		nodes := make([]tlog.HashedNode, 0, len(b.Nodes)+len(entries[k]))
		bad := false
		for _, n := range b.Nodes {
			h, err := base64.StdEncoding.DecodeString(n.Hash)
			if err != nil || len(h) != 32 {
				bad = true
				break
			}
			nodes = append(nodes, tlog.HashedNode{Node: tlog.Node{Level: n.Level, Index: n.Index}, Hash: tlog.Hash(h)})
		}
		if bad {
			fail("%s: a node hash is not the base64 of 32 bytes", name)
			continue
		}
		seen := map[int64]bool{}
		var dupes []string
		for _, e := range entries[k] {
			switch {
			case e.index < b.FirstLeaf || e.index > b.LastLeaf:
				dupes = append(dupes, fmt.Sprintf("leaf %d (event %s) outside the batch's leaves %d..%d", e.index, e.event, b.FirstLeaf, b.LastLeaf))
			case seen[e.index]:
				dupes = append(dupes, fmt.Sprintf("leaf %d (event %s) twice in one batch", e.index, e.event))
			default:
				seen[e.index] = true
				nodes = append(nodes, tlog.HashedNode{Node: tlog.Node{Level: 0, Index: e.index}, Hash: e.leaf})
			}
		}
		root, err := tlog.RootOfNodes(cp.Size, nodes)
		if err != nil || root != cp.Root {
			why := "they make another root"
			if err != nil {
				why = err.Error()
			}
			fail("%s: leaves %d..%d: the entries received and the batch's subtrees do not make the checkpoint's root (%s): an entry was altered, or one is missing from the body", name, b.FirstLeaf, b.LastLeaf, why)
			continue
		}
		for _, d := range dupes {
			out = append(out, Finding{"duplicate", name + ": " + d})
		}
		st := v.logs[k]
		if st != nil {
			switch {
			case b.FirstLeaf > st.next:
				out = append(out, Finding{"gap", fmt.Sprintf("%s: leaves %d..%d were never delivered (a batch is missing)", name, st.next, b.FirstLeaf-1)})
			case b.FirstLeaf < st.next:
				out = append(out, Finding{"duplicate", fmt.Sprintf("%s: leaves %d..%d were covered again (a batch delivered twice)", name, b.FirstLeaf, min(st.next, b.LastLeaf+1)-1)})
			default:
				if fr, err := tlog.Frontier(b.FirstLeaf, nodes); err == nil && !sameNodes(fr, st.frontier) {
					fail("%s: the tree before leaf %d is not the one the previous batch proved: the log was forked or rewritten", name, b.FirstLeaf)
					continue
				}
			}
			if b.From == st.size && st.size > 0 && st.size < cp.Size {
				proof, err := decodeHashes(b.Consistency)
				if err != nil || sumtlog.CheckTree(proof, cp.Size, sumtlog.Hash(cp.Root), st.size, sumtlog.Hash(st.root)) != nil {
					fail("%s: the consistency proof from the previous checkpoint (size %d) to this one (size %d) does not verify: the log was forked or rolled back", name, st.size, cp.Size)
					continue
				}
			}
			if cp.Size < st.size {
				fail("%s: the checkpoint of size %d is smaller than the previous batch's %d: the log was rolled back", name, cp.Size, st.size)
				continue
			}
		}
		fr, err := tlog.Frontier(b.LastLeaf+1, nodes)
		if err != nil {
			fr = nil // a subtree straddles the range's end: continuity is checked by the consistency proof
		}
		v.logs[k] = &logState{next: b.LastLeaf + 1, frontier: fr, size: cp.Size, root: cp.Root}
		out = append(out, Finding{"verified", fmt.Sprintf("%s: leaves %d..%d (%d entries here) are in the checkpoint of size %d", name, b.FirstLeaf, b.LastLeaf, len(seen), cp.Size)})
	}
	for k, es := range entries {
		if !covered[k] && len(es) > 0 {
			out = append(out, Finding{"unproven", fmt.Sprintf("organization %s %s: %d entries with a leaf_index but no batch line", k.org, k.log, len(es))})
		}
	}
	return out
}

func sameNodes(a, b []tlog.HashedNode) bool {
	if b == nil {
		return true // not known: the consistency proof checks it
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func decodeHashes(s []string) (sumtlog.TreeProof, error) {
	out := make(sumtlog.TreeProof, len(s))
	for i, h := range s {
		b, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("hash %d: %s", i, strings.TrimSpace(h))
		}
		copy(out[i][:], b)
	}
	return out, nil
}
