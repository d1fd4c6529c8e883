package query

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// ExpiryReader reads the expiries kept beside the logs (the store's
// auditstore.LifecycleStore): with it, a whole JSONL export carries the
// lifecycle lines that let the verifier accept the expired leaves, and a
// proof of an expired entry answers 410.
type ExpiryReader interface {
	LatestExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Expiry, bool, error)
}

// exportLife is what a whole JSONL export of a log with an expiry collects
// for its lifecycle lines: the expiry, and which leaves below its horizon
// the export holds (a bitmap; written by the export's reader goroutine,
// read after it ended).
type exportLife struct {
	exp     auditstore.Expiry
	horizon int64
	present []uint64
	// erasures are the erasures of the entries exported (their records
	// go with the export).
	erasures map[string]bool
	hasExp   bool
}

// exportLifecycle returns the collector of a whole export of the log
// against the checkpoint of size (nil: the log has no expiry, or the
// store keeps none).
func (s *Server) exportLifecycle(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (*exportLife, error) {
	if (s.expiries == nil && s.erased == nil) || size == 0 {
		return nil, nil
	}
	l := &exportLife{erasures: map[string]bool{}}
	if s.expiries == nil {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	exp, ok, err := s.expiries.LatestExpiry(ctx, org, kind)
	if err != nil || !ok {
		return l, err
	}
	h := min(exp.BelowLeaf, size)
	l.exp, l.horizon, l.present, l.hasExp = exp, h, make([]uint64, (h+63)/64), true
	return l, nil
}

// see notes an exported entry's leaf and erasure.
func (l *exportLife) see(idx *int64, erased *apiitem.Erasure) {
	if l == nil {
		return
	}
	if erased != nil {
		l.erasures[erased.ID] = true
	}
	if idx == nil || *idx < 0 || *idx >= l.horizon {
		return
	}
	l.present[*idx/64] |= 1 << (*idx % 64)
}

func (l *exportLife) has(i int64) bool { return l.present[i/64]&(1<<(i%64)) != 0 }

// runs are the runs of leaves below the horizon that the export lacks.
func (l *exportLife) runs() [][2]int64 {
	var out [][2]int64
	for i := int64(0); i < l.horizon; i++ {
		if l.has(i) {
			continue
		}
		j := i
		for j+1 < l.horizon && !l.has(j+1) {
			j++
		}
		out = append(out, [2]int64{i, j})
		i = j
	}
	return out
}

// writeLifecycleLines writes an expired line per run of missing leaves
// (the stored hashes of the subtrees over it) and the record line of the
// expiry (the record entry, its inclusion proof in the audit log's latest
// checkpoint and that checkpoint).
func (s *Server) writeLifecycleLines(ctx context.Context, w *bufio.Writer, org uuid.UUID, kind auditstore.LogKind, l *exportLife) error {
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout*4)
	defer cancel()
	if len(l.erasures) > 0 {
		rps, err := s.erasureRecordProofs(ctx, org, l.erasures)
		if err != nil {
			return err
		}
		for _, rp := range rps {
			if err := writeLine(w, tlog.RecordLineMember, rp); err != nil {
				return err
			}
		}
	}
	if !l.hasExp {
		return nil
	}
	for _, run := range l.runs() {
		pieces := tlog.Pieces(run[0], run[1]+1)
		idx := make([]int64, len(pieces))
		for i, p := range pieces {
			idx[i] = p.StoredIndex()
		}
		hs, err := s.logs.ReadLogHashes(ctx, org, kind, idx)
		if err != nil {
			return fmt.Errorf("expired leaves %d..%d: %w", run[0], run[1], err)
		}
		r := tlog.ExpiredRun{FirstLeaf: run[0], LastLeaf: run[1], Hashes: make([]string, len(hs))}
		for i, h := range hs {
			r.Hashes[i] = base64.StdEncoding.EncodeToString(h[:])
		}
		if err := writeLine(w, tlog.ExpiredLineMember, r); err != nil {
			return err
		}
	}
	rp, err := s.recordProof(ctx, org, l.exp.Record)
	if err != nil {
		return err
	}
	return writeLine(w, tlog.RecordLineMember, rp)
}

// recordProof is a lifecycle record of the organization's audit log with
// its inclusion proof in the log's latest checkpoint.
func (s *Server) recordProof(ctx context.Context, org, record uuid.UUID) (tlog.RecordProof, error) {
	if s.logs == nil {
		return tlog.RecordProof{}, fmt.Errorf("no log store")
	}
	q, err := search.Parse(search.Audit, search.KeyEventID+":"+record.String())
	if err != nil {
		return tlog.RecordProof{}, err
	}
	page, err := s.store.ListAudit(ctx, auditstore.Query{OrgID: org, Filter: auditstore.Filter{Search: q}, Limit: 1})
	if err != nil {
		return tlog.RecordProof{}, fmt.Errorf("the expiry record %s: %w", record, err)
	}
	if len(page.Items) == 0 {
		return tlog.RecordProof{}, fmt.Errorf("the expiry record %s is not in the store", record)
	}
	entry, err := json.Marshal(apiitem.NewItem(&page.Items[0]))
	if err != nil {
		return tlog.RecordProof{}, err
	}
	cp, ok, err := s.logs.LatestCheckpoint(ctx, org, auditstore.LogAudit)
	if err != nil || !ok {
		return tlog.RecordProof{}, fmt.Errorf("the audit log's checkpoint: %v", err)
	}
	p, err := s.proof(ctx, org, auditstore.LogAudit, record, cp.Size)
	if err != nil {
		return tlog.RecordProof{}, fmt.Errorf("the expiry record's proof: %w", err)
	}
	return tlog.RecordProof{Entry: entry, LeafIndex: p.LeafIndex, Proof: p.Hashes, Checkpoint: string(cp.Note)}, nil
}

func writeLine(w *bufio.Writer, member string, v any) error {
	b, err := json.Marshal(map[string]any{member: v})
	if err != nil {
		return fmt.Errorf("encode %s line: %w", member, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// latestExpiry starts reading the log's latest expiry, beside the
// proof's reads (one store round trip less a proof), and returns what
// waits for it.
func (s *Server) latestExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) func() (auditstore.Expiry, bool, error) {
	if s.expiries == nil {
		return func() (auditstore.Expiry, bool, error) { return auditstore.Expiry{}, false, nil }
	}
	type result struct {
		exp auditstore.Expiry
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.exp, r.ok, r.err = s.expiries.LatestExpiry(ctx, org, kind)
		done <- r
	}()
	return func() (auditstore.Expiry, bool, error) {
		r := <-done
		return r.exp, r.ok, r.err
	}
}

// expiredProof answers 410 when the leaf index of an event of the log is
// below the horizon of its latest expiry and the entry is gone from the
// store: the entry expired, and its proof is no longer served.
func (s *Server) expiredProof(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, index int64, latest func() (auditstore.Expiry, bool, error)) error {
	if s.expiries == nil {
		return nil
	}
	exp, ok, err := latest()
	if err != nil {
		return fmt.Errorf("latest expiry: %w", err)
	}
	if !ok || index >= exp.BelowLeaf {
		return nil
	}
	found := false
	if kind == auditstore.LogAudit {
		found, err = s.store.HasAudit(ctx, org, nil, event)
	} else if execs, ok := s.store.(ExecutionReader); ok {
		found, err = execs.HasExecution(ctx, org, nil, event)
	}
	if err != nil {
		return fmt.Errorf("look the entry up: %w", err)
	}
	if found {
		return nil
	}
	return fiber.NewError(fiber.StatusGone, fmt.Sprintf("event %s expired under the organization's retention of %s (leaf %d; expiry recorded by event %s)",
		event, cpstate.FormatRetention(exp.Retention), index, exp.Record))
}

// ErasureReader tells the erased entries (the store's
// auditstore.ErasureStore): with it, the routes serve each erased entry
// with its erasure member, and whole JSONL exports carry the records of
// the erasures.
type ErasureReader interface {
	ErasedEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]auditstore.ErasedEntry, error)
}

// erasedOf returns the erasure members of those of events that were erased
// (nil without an erasure reader).
func (s *Server) erasedOf(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, events []uuid.UUID) (map[uuid.UUID]*apiitem.Erasure, error) {
	if s.erased == nil || len(events) == 0 {
		return nil, nil
	}
	m, err := s.erased.ErasedEntries(ctx, org, kind, events)
	if err != nil {
		return nil, fmt.Errorf("erased entries: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[uuid.UUID]*apiitem.Erasure, len(m))
	for id, e := range m {
		out[id] = &apiitem.Erasure{ID: e.Erasure.String(), LeafHash: base64.StdEncoding.EncodeToString(e.LeafHash[:]), Fields: e.Fields}
	}
	return out, nil
}

// execErased is erasedOf's answer for an execution's event id.
func execErased(m map[uuid.UUID]*apiitem.Erasure, id string) *apiitem.Erasure {
	if m == nil {
		return nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil
	}
	return m[u]
}

// erasureRecordProofs are the records of the erasures an export saw, each
// with its inclusion proof in the audit log's latest checkpoint: the
// audit entries of the lifecycle whose resource_id is the erasure.
func (s *Server) erasureRecordProofs(ctx context.Context, org uuid.UUID, erasures map[string]bool) ([]tlog.RecordProof, error) {
	var out []tlog.RecordProof
	ids := make([]string, 0, len(erasures))
	for id := range erasures {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		q, err := search.Parse(search.Audit, search.KeyActor+":"+LifecyclePrincipal+" "+search.KeyResourceID+":"+id)
		if err != nil {
			return nil, err
		}
		var after *auditstore.Key
		for {
			page, err := s.store.ListAudit(ctx, auditstore.Query{OrgID: org, Filter: auditstore.Filter{Search: q}, After: after, Limit: 100})
			if err != nil {
				return nil, fmt.Errorf("the records of erasure %s: %w", id, err)
			}
			for i := range page.Items {
				rp, err := s.recordProof(ctx, org, page.Items[i].EventID)
				if err != nil {
					return nil, err
				}
				out = append(out, rp)
			}
			if after = page.Next(); after == nil {
				break
			}
		}
	}
	return out, nil
}

// LifecyclePrincipal is the principal of the lifecycle's records.
const LifecyclePrincipal = "auditrail-lifecycle"
