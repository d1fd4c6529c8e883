package checkpointer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
)

// Witnesses (C2SP tlog-witness): after each round, every checkpoint signed
// in it is submitted to the witnesses of its organization (the operator's,
// Config.Witnesses, and the organization's own, Deps.OrgWitnesses), with
// the consistency proof from the size each witness knows. The
// cosignatures that verify are added to the note, which is stored again
// (the same checkpoint with more signature lines replaces the one stored)
// and published again. A witness that cannot be reached is skipped for the
// rest of the round and tried again the next round with the log's newest
// checkpoint, until it cosigns; one that refuses (403, 422, a size beyond
// the checkpoint's) is not sent that checkpoint again, only the next.

// WitnessClient submits a checkpoint to a witness (*witness.Client).
type WitnessClient interface {
	AddCheckpoint(ctx context.Context, w witness.Witness, oldSize, size int64, proof []tlog.Hash, note []byte) (tlog.Cosignature, error)
}

// OrgWitness is a witness an organization added.
type OrgWitness struct {
	ID      string
	Witness witness.Witness
}

// OrgWitnesses lists the witnesses of an organization (the control
// plane's).
type OrgWitnesses interface {
	OrgWitnesses(ctx context.Context, org uuid.UUID) ([]OrgWitness, error)
}

// WitnessObserver receives the witnesses' metrics (optional: an Observer
// that implements it).
type WitnessObserver interface {
	// WitnessSubmitted counts a submission by its result: cosigned,
	// conflict, refused, unavailable, bad_answer.
	WitnessSubmitted(result string)
}

// WitnessStatus is what the checkpointer knows of one witness of one log,
// as it writes it in the tlog bucket (WitnessStatusKey) for the API.
type WitnessStatus struct {
	// Witness is the witness's key (vkey), URL where it takes
	// checkpoints, and ID the organization's id for it (OperatorID for
	// the operator's).
	Witness string    `json:"vkey"`
	URL     string    `json:"url"`
	ID      string    `json:"id"`
	Org     uuid.UUID `json:"organization_id"`
	// Kind is the log's route segment (audit_logs, tool_executions).
	Kind string `json:"kind"`
	// CosignedSize is the size of the last checkpoint it cosigned (-1:
	// none yet); Error the last submission's error ("" after a
	// cosignature); At when it was last tried.
	CosignedSize int64     `json:"last_cosigned_size"`
	Error        string    `json:"last_error"`
	At           time.Time `json:"at"`
}

// WitnessStatusPrefix starts the keys of the witnesses' statuses in the
// tlog bucket: wstatus.<org>.<kind>.<id>.
const WitnessStatusPrefix = "wstatus."

// WitnessStatusKey is the tlog bucket's key of a witness's status for one
// log.
func WitnessStatusKey(org uuid.UUID, kind, id string) string {
	return WitnessStatusPrefix + org.String() + "." + kind + "." + id
}

// OperatorWitnessesKey is the tlog bucket's key listing the operator's
// witnesses ([]OperatorWitness), written when the checkpointer leads.
const OperatorWitnessesKey = "witnesses.operator"

// OperatorWitness is one of the operator's witnesses as listed.
type OperatorWitness struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	VKey string `json:"vkey"`
	Name string `json:"name"`
}

// OperatorID is the id of an operator's witness: "operator-" and 16 hex
// digits of the SHA-256 of its vkey (stable across restarts).
func OperatorID(w witness.Witness) string {
	h := sha256.Sum256([]byte(w.Key.String()))
	return "operator-" + hex.EncodeToString(h[:8])
}

// publishOperatorWitnesses writes the operator's witnesses in the tlog
// bucket (the API lists them beside an organization's own).
func (c *Checkpointer) publishOperatorWitnesses(ctx context.Context) {
	list := make([]OperatorWitness, 0, len(c.cfg.Witnesses))
	for _, w := range c.cfg.Witnesses {
		list = append(list, OperatorWitness{ID: OperatorID(w), URL: w.URL, VKey: w.Key.String(), Name: w.Key.Name})
	}
	b, err := json.Marshal(list)
	if err == nil {
		_, err = c.d.KV.Put(ctx, OperatorWitnessesKey, b)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("checkpointer: the operator's witnesses not listed in the tlog bucket", "err", err)
	}
}

// saveStatus writes a witness's status for a log (best effort: the API
// shows it; the checkpointer does not read it back).
func (c *Checkpointer) saveStatus(ctx context.Context, id logID, t target, st witnessState) {
	ws := WitnessStatus{Witness: t.key(), URL: t.w.URL, ID: t.id, Org: id.org, Kind: tlogKind(id.kind).String(),
		CosignedSize: st.cosigned, Error: st.err, At: st.at}
	if ws.ID == "" {
		ws.ID = OperatorID(t.w)
	}
	b, err := json.Marshal(ws)
	if err == nil {
		_, err = c.d.KV.Put(ctx, WitnessStatusKey(id.org, ws.Kind, ws.ID), b)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("checkpointer: witness status not saved", "witness", t.w.Key.Name, "err", err)
	}
}

// target is one witness of a log as the checkpointer calls it.
type target struct {
	id     string // the organization's id for it; "" for the operator's
	w      witness.Witness
	client WitnessClient
}

func (t target) key() string { return t.w.Key.String() }

// pendingCosign is a checkpoint still missing cosignatures.
type pendingCosign struct {
	cp      auditstore.Checkpoint // Note: as stored, with the cosignatures so far
	own     []byte                // the note with the log's signature only
	missing []target
}

type witnessKey struct {
	vkey string
	log  logID
}

// witnessState is kept per witness and log while leading.
type witnessState struct {
	known    int64 // the size the witness knows; -1 unknown
	cosigned int64
	err      string
	at       time.Time
}

// witnesses returns the witnesses of org: the operator's, then the
// organization's.
func (c *Checkpointer) witnesses(ctx context.Context, org uuid.UUID) ([]target, error) {
	var out []target
	for _, w := range c.cfg.Witnesses {
		out = append(out, target{w: w, client: c.d.Witness})
	}
	if c.d.OrgWitnesses == nil {
		return out, nil
	}
	ows, err := c.d.OrgWitnesses.OrgWitnesses(ctx, org)
	c.mu.Lock()
	if err != nil {
		// The last list read stands in (the control plane's state may be
		// briefly unreadable): its witnesses do not miss this checkpoint.
		last, ok := c.orgLists[org]
		c.mu.Unlock()
		if !ok {
			return out, fmt.Errorf("witnesses of org %s: %w", org, err)
		}
		ows, err = last, nil
	} else {
		prev, known := c.orgLists[org]
		if len(c.orgLists) >= maxOrgLists {
			clear(c.orgLists)
		}
		c.orgLists[org] = ows
		c.mu.Unlock()
		if known {
			c.forgetRemoved(ctx, org, prev, ows)
		}
	}
	// A witness the operator names too is called once, as the operator's.
	seen := map[string]bool{}
	for _, t := range out {
		seen[t.key()] = true
	}
	for _, ow := range ows {
		t := target{id: ow.ID, w: ow.Witness, client: c.d.OrgWitness}
		if seen[t.key()] {
			continue
		}
		seen[t.key()] = true
		out = append(out, t)
	}
	return out, nil
}

// forgetRemoved deletes the statuses of the witnesses an organization
// removed (in prev, not in now): the API lists statuses by id.
func (c *Checkpointer) forgetRemoved(ctx context.Context, org uuid.UUID, prev, now []OrgWitness) {
	kept := map[string]bool{}
	for _, w := range now {
		kept[w.ID] = true
	}
	for _, w := range prev {
		if kept[w.ID] {
			continue
		}
		for _, k := range logKinds {
			if err := c.d.KV.Delete(ctx, WitnessStatusKey(org, tlogKind(k).String(), w.ID)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && ctx.Err() == nil {
				c.log.Warn("checkpointer: a removed witness's status not deleted", "witness", w.ID, "err", err)
			}
		}
	}
}

// logKinds are the two logs of an organization.
var logKinds = [2]auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions}

// maxOrgLists bounds the organizations' witness lists kept.
const maxOrgLists = 100_000

// queueCosign records a checkpoint just stored for its witnesses.
func (c *Checkpointer) queueCosign(ctx context.Context, id logID, cp auditstore.Checkpoint, pub tlog.PublicKey) {
	ts, err := c.witnesses(ctx, id.org)
	if err != nil {
		c.log.Warn("checkpointer: witnesses not read", "err", err)
	}
	if len(ts) == 0 {
		return
	}
	own, err := tlog.OwnSignatures(cp.Note, pub)
	if err != nil {
		c.log.Error("checkpointer: a checkpoint without its own signature", "err", err)
		return
	}
	c.mu.Lock()
	c.pending[id] = &pendingCosign{cp: cp, own: own, missing: ts}
	c.mu.Unlock()
}

// cosignRound submits the pending checkpoints to their witnesses; keep
// (nil: none) renews the lease before each log (a submission takes at most
// WitnessTimeout, half the lease's TTL) and stops the round when it is lost.
func (c *Checkpointer) cosignRound(ctx context.Context, keep func(context.Context) bool) {
	c.mu.Lock()
	ids := make([]logID, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	slices.SortFunc(ids, func(a, b logID) int {
		if a.kind != b.kind {
			return int(a.kind) - int(b.kind)
		}
		return slices.Compare(a.org[:], b.org[:])
	})
	var down sync.Map // witness vkey → true: unreachable this round
	work := make(chan logID)
	var wg sync.WaitGroup
	for range min(c.cfg.WitnessConcurrency, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				c.cosignLog(ctx, id, &down)
			}
		}()
	}
	for _, id := range ids {
		if keep != nil && !keep(ctx) {
			break
		}
		select {
		case work <- id:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// cosignLog submits one log's pending checkpoint to the witnesses still
// missing, stores and publishes it with the cosignatures it got.
func (c *Checkpointer) cosignLog(ctx context.Context, id logID, down *sync.Map) {
	defer func() {
		if r := recover(); r != nil { // a witness's answer must not end the role
			c.log.Error("checkpointer: panic while cosigning", "panic", fmt.Sprint(r))
		}
	}()
	c.mu.Lock()
	p := c.pending[id]
	c.mu.Unlock()
	if p == nil {
		return
	}
	var got []tlog.Cosignature
	var still []target
	for _, t := range p.missing {
		if _, isDown := down.Load(t.key()); isDown || ctx.Err() != nil {
			still = append(still, t)
			continue
		}
		cs, err := c.submit(ctx, id, p, t)
		switch {
		case err == nil:
			got = append(got, cs)
		case errors.Is(err, witness.ErrUnavailable):
			down.Store(t.key(), true)
			still = append(still, t)
		}
	}
	if len(got) > 0 {
		note, err := tlog.WithCosignatures(p.cp.Note, got)
		if err == nil {
			cp := p.cp
			cp.Note = note
			if err = c.d.Store.SaveCheckpoint(ctx, id.org, id.kind, cp); err == nil {
				p.cp = cp
				if perr := c.publish(ctx, id.org, note); perr != nil {
					c.log.Warn("checkpointer: cosigned checkpoint not published", "org", id.org, "err", perr)
				}
			}
		}
		if err != nil {
			c.log.Warn("checkpointer: cosignatures not stored", "org", id.org, "kind", id.kind, "err", err)
			still = p.missing // all again next round
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[id] != p { // a newer checkpoint of the log came meanwhile
		return
	}
	p.missing = still
	if len(still) == 0 {
		delete(c.pending, id)
	}
}

// submit sends p to t: with the proof from the size t is known to have, or
// again from the size its 409 says.
func (c *Checkpointer) submit(ctx context.Context, id logID, p *pendingCosign, t target) (tlog.Cosignature, error) {
	k := witnessKey{t.key(), id}
	c.mu.Lock()
	st, ok := c.wstate[k]
	c.mu.Unlock()
	if !ok {
		st = witnessState{known: 0, cosigned: -1}
	}
	old := min(max(st.known, 0), p.cp.Size)
	var cs tlog.Cosignature
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var proof []tlog.Hash
		if proof, err = c.proof(ctx, id, old, p.cp.Size); err != nil {
			break
		}
		actx, cancel := context.WithTimeout(ctx, min(c.cfg.WitnessTimeout, c.cfg.LeaseTTL/2))
		cs, err = t.client.AddCheckpoint(actx, t.w, old, p.cp.Size, proof, p.own)
		cancel()
		var conflict *witness.ConflictError
		if !errors.As(err, &conflict) || conflict.Size == old {
			break
		}
		c.observe("conflict")
		old = conflict.Size
		st.known = old
	}
	st.at = c.now()
	switch {
	case err == nil:
		st.known, st.cosigned, st.err = p.cp.Size, p.cp.Size, ""
		c.observe("cosigned")
	default:
		st.err = err.Error()
		switch {
		case errors.Is(err, witness.ErrUnavailable):
			c.observe("unavailable")
		case errors.Is(err, witness.ErrRefused):
			c.observe("refused")
		default:
			c.observe("bad_answer")
		}
		c.log.Warn("checkpointer: witness did not cosign", "witness", t.w.Key.Name, "url", t.w.URL, "org", id.org,
			"kind", id.kind, "size", p.cp.Size, "err", err)
	}
	c.mu.Lock()
	c.wstate[k] = st
	c.mu.Unlock()
	c.saveStatus(ctx, id, t, st)
	return cs, err
}

// proof is the consistency proof from old to size (none from 0 or to
// itself).
func (c *Checkpointer) proof(ctx context.Context, id logID, old, size int64) ([]tlog.Hash, error) {
	if old <= 0 || old >= size {
		return nil, nil
	}
	p, err := sumtlog.ProveTree(size, old, auditstore.LogHashReader(ctx, c.d.Store, id.org, id.kind))
	if err != nil {
		return nil, fmt.Errorf("consistency proof %d→%d: %w", old, size, err)
	}
	out := make([]tlog.Hash, len(p))
	for i := range p {
		out[i] = tlog.Hash(p[i])
	}
	return out, nil
}

func (c *Checkpointer) observe(result string) {
	if o, ok := c.d.Observer.(WitnessObserver); ok {
		o.WitnessSubmitted(result)
	}
}

// WitnessStatuses lists what this instance knows of its witnesses, while
// it leads (nothing otherwise), by organization and kind.
func (c *Checkpointer) WitnessStatuses() []WitnessStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]WitnessStatus, 0, len(c.wstate))
	for k, st := range c.wstate {
		out = append(out, WitnessStatus{Witness: k.vkey, Org: k.log.org, Kind: tlogKind(k.log.kind).String(), CosignedSize: st.cosigned, Error: st.err, At: st.at})
	}
	slices.SortFunc(out, func(a, b WitnessStatus) int { return strings.Compare(a.Witness, b.Witness) })
	return out
}
