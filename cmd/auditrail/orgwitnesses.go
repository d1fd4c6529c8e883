package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/retry"
)

// The organizations' own witnesses (POST /api/v1/orgs/{org_id}/witnesses),
// as the tlog role's checkpointer reads them: from a read-only mirror of
// the control-plane state (the deliver and lifecycle roles' kind: a watch,
// not a query per round), opened in the background so that the sequencer
// and the operator's witnesses never wait for the control plane. Their
// URLs are a tenant's choice: the client that calls them dials through the
// egress guard (orgWitnessClient).

// witnessDialTimeout bounds the connection to an organization's witness
// (the checkpointer bounds each submission as a whole).
const witnessDialTimeout = 10 * time.Second

// orgWitnessClient is the client of the organizations' witnesses: every
// connection passes guard (the process's egress guard: a name that
// resolved to a public address when the witness was added and to
// 127.0.0.1 now is refused), no redirect is followed.
func orgWitnessClient(guard *egress.Guard) *witness.Client {
	return witness.NewClient(guard.Transport(witnessDialTimeout))
}

// orgWitnesses is checkpointer.OrgWitnesses over the mirror.
type orgWitnesses struct {
	st  atomic.Pointer[cpstate.State]
	log *slog.Logger
}

var _ checkpointer.OrgWitnesses = (*orgWitnesses)(nil)

// errNoMirror: the control-plane state is not mirrored yet.
var errNoMirror = errors.New("the control-plane state is not mirrored yet (the control plane's bucket may not exist yet)")

// mirror opens the read-only mirror of the control-plane state on js,
// retrying until it opens (the control plane creates the bucket) or ctx
// ends; the mirror follows the bucket until ctx ends.
func (w *orgWitnesses) mirror(ctx context.Context, js jetstream.JetStream) {
	cfg := cpstate.DefaultStateConfig()
	cfg.ReadOnly = true
	start, warned := time.Now(), time.Time{}
	err := retry.Do(ctx, httpapi.StartPolicy, func(ctx context.Context) error {
		st, err := cpstate.OpenState(ctx, js, cfg, w.log)
		if err != nil {
			return err
		}
		w.st.Store(st)
		return nil
	}, func(err error, next time.Duration) {
		// At first the control plane may not have created its bucket yet;
		// still failing after a while is worth a warning (every minute):
		// credentials without the permission to read it, say.
		if now := time.Now(); now.Sub(start) > 30*time.Second && now.Sub(warned) > time.Minute {
			warned = now
			w.log.Warn("tlog: the control-plane state cannot be mirrored yet: the organizations' witnesses are not called", "err", err)
			return
		}
		w.log.Debug("tlog: waiting for the control-plane state (the organizations' witnesses)", "err", err, "retry_in", next.Round(time.Millisecond))
	})
	if err != nil && ctx.Err() == nil {
		w.log.Error("tlog: the control-plane state cannot be mirrored: the organizations' witnesses are not called", "err", err)
	}
}

// OrgWitnesses lists the witnesses org added. It fails while the mirror is
// not open or not confirmed current (checkpointer.OrgWitnesses: the
// checkpoint goes to the operator's witnesses only): a stale mirror could
// still name a witness the organization removed. A witness that does not
// parse (a record written by hand) is skipped and logged.
func (w *orgWitnesses) OrgWitnesses(_ context.Context, org uuid.UUID) ([]checkpointer.OrgWitness, error) {
	st := w.st.Load()
	if st == nil {
		return nil, errNoMirror
	}
	if err := st.Fresh(); err != nil {
		return nil, err
	}
	list, _, err := cpstate.WitnessesOf(st, org)
	if err != nil {
		return nil, err
	}
	out := make([]checkpointer.OrgWitness, 0, len(list))
	for _, cw := range list {
		ww, err := witness.New(cw.URL, cw.VKey)
		if err != nil {
			w.log.Warn("tlog: a witness of the organization does not parse; skipped", "org", org, "witness", cw.ID, "err", err)
			continue
		}
		out = append(out, checkpointer.OrgWitness{ID: cw.ID.String(), Witness: ww})
	}
	return out, nil
}
