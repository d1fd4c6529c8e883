package controlplane

// The witnesses of an organization (CONTRACT.md "Witnesses and tiles"):
// C2SP tlog-witnesses that the checkpointer (the tlog role) sends each of
// the organization's checkpoints to, beside the operator's (--witness).
// Owners and admins add and remove the organization's own, each change one
// RESOURCE_TYPE_SETTING event; members list them all with what the
// checkpointer last reported of each (the tlog bucket: the operator's
// witnesses and every witness's status per log).
//
// A witness's URL is chosen by a tenant and called by the platform: it
// passes the egress guard here (loopback, private, link-local and metadata
// addresses refused unless the deployment allows them, as a destination's)
// and again on every connection the tlog role makes to it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Where a witness comes from: the operator's (--witness, not removable
// through the API) or the organization's own.
const (
	WitnessSourceOperator     = "operator"
	WitnessSourceOrganization = "organization"
)

// A witness's status for a log: pending until the checkpointer submitted a
// checkpoint to it, cosigning when the last submission was cosigned,
// failing when it was not (last_error says why).
const (
	WitnessPending   = "pending"
	WitnessCosigning = "cosigning"
	WitnessFailing   = "failing"
)

// maxWitnessURL bounds a witness's URL.
const maxWitnessURL = 2048

// witnessLogs are the logs a witness is reported on, the first the one
// whose status is the witness's.
var witnessLogs = []string{tlog.KindAudit.String(), tlog.KindExecutions.String()}

// witnessLog is what the checkpointer last reported of a witness for one
// log (checkpointer.WitnessStatus).
type witnessLog struct {
	Status           string     `json:"status"`
	LastCosignedSize *int64     `json:"last_cosigned_size"`
	LastError        string     `json:"last_error"`
	At               *time.Time `json:"at"`
}

// witnessReply is a witness as the routes answer it: status,
// last_cosigned_size and last_error are those of the audit_logs log.
type witnessReply struct {
	ID               string                `json:"id"`
	OrgID            *uuid.UUID            `json:"organization_id,omitempty"`
	URL              string                `json:"url"`
	VKey             string                `json:"vkey"`
	Name             string                `json:"name"`
	Source           string                `json:"source"`
	CreatedAt        *time.Time            `json:"created_at"`
	Status           string                `json:"status"`
	LastCosignedSize *int64                `json:"last_cosigned_size"`
	LastError        string                `json:"last_error"`
	Logs             map[string]witnessLog `json:"logs"`
	Warnings         []string              `json:"warnings,omitempty"`
}

// registerWitnesses mounts the witness routes.
func (s *Service) registerWitnesses(v routes) {
	base := "/orgs/:org_id/witnesses"
	v.Get(base, s.listWitnesses)
	v.Post(base, s.createWitness)
	v.Get(base+"/:witness_id", s.getWitness)
	v.Delete(base+"/:witness_id", s.deleteWitness)
}

// orgWitnessReply is an organization's witness without a status yet.
func orgWitnessReply(w cpstate.Witness) witnessReply {
	org, at := w.OrgID, w.CreatedAt
	return witnessReply{ID: w.ID.String(), OrgID: &org, URL: w.URL, VKey: w.VKey, Name: w.Name, Source: WitnessSourceOrganization,
		CreatedAt: &at}
}

// withStatus fills r's statuses from the tlog bucket's values (statuses:
// by WitnessStatusKey); a status of another key than r's is ignored.
func withStatus(r witnessReply, org uuid.UUID, statuses map[string][]byte) witnessReply {
	r.Logs = make(map[string]witnessLog, len(witnessLogs))
	for _, kind := range witnessLogs {
		l := witnessLog{Status: WitnessPending}
		var st checkpointer.WitnessStatus
		if b, ok := statuses[checkpointer.WitnessStatusKey(org, kind, r.ID)]; ok && json.Unmarshal(b, &st) == nil && st.Witness == r.VKey {
			at := st.At
			l.At, l.LastError = &at, st.Error
			if st.CosignedSize >= 0 {
				n := st.CosignedSize
				l.LastCosignedSize = &n
			}
			switch {
			case st.Error != "":
				l.Status = WitnessFailing
			case st.CosignedSize >= 0:
				l.Status = WitnessCosigning
			}
		}
		r.Logs[kind] = l
	}
	audit := r.Logs[witnessLogs[0]]
	r.Status, r.LastCosignedSize, r.LastError = audit.Status, audit.LastCosignedSize, audit.LastError
	return r
}

// operatorWitnesses reads the operator's witnesses from the tlog bucket
// (none until a checkpointer has led).
func (s *Service) operatorWitnesses(ctx context.Context) ([]checkpointer.OperatorWitness, error) {
	vals, err := s.state.TLogValues(ctx, checkpointer.OperatorWitnessesKey)
	if err != nil {
		return nil, err
	}
	var ops []checkpointer.OperatorWitness
	if b, ok := vals[checkpointer.OperatorWitnessesKey]; ok {
		if err := json.Unmarshal(b, &ops); err != nil {
			return nil, fmt.Errorf("%w: the operator's witnesses in the tlog bucket: %w", cpstate.ErrUnavailabe, err)
		}
	}
	return ops, nil
}

// witnessesOf answers every witness of org, the operator's first, with
// their statuses.
func (s *Service) witnessesOf(ctx context.Context, org uuid.UUID) ([]witnessReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ops, err := s.operatorWitnesses(ctx)
	if err != nil {
		return nil, err
	}
	own, _, err := cpstate.WitnessesOf(s.state, org)
	if err != nil {
		return nil, err
	}
	out := make([]witnessReply, 0, len(ops)+len(own))
	for _, o := range ops {
		out = append(out, witnessReply{ID: o.ID, URL: o.URL, VKey: o.VKey, Name: o.Name, Source: WitnessSourceOperator})
	}
	for _, w := range own {
		out = append(out, orgWitnessReply(w))
	}
	keys := make([]string, 0, len(out)*len(witnessLogs))
	for _, r := range out {
		for _, kind := range witnessLogs {
			keys = append(keys, checkpointer.WitnessStatusKey(org, kind, r.ID))
		}
	}
	statuses, err := s.state.TLogValues(ctx, keys...)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = withStatus(out[i], org, statuses)
	}
	return out, nil
}

// listWitnesses answers data: the array of the witnesses.
func (s *Service) listWitnesses(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	list, err := s.witnessesOf(c.UserContext(), org.ID)
	if err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusOK, list)
}

// witnessID reads the witness_id parameter: an organization's witness's
// UUID or an operator's witness's id (checkpointer.OperatorID).
func witnessID(c *fiber.Ctx) (id string, operator bool, err error) {
	id = c.Params("witness_id")
	if strings.HasPrefix(id, "operator-") && len(id) == len("operator-")+16 && strings.Trim(id[len("operator-"):], "0123456789abcdef") == "" {
		return id, true, nil
	}
	if _, err := uuidParam(c, "witness_id"); err != nil {
		return "", false, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("witness_id: %q is neither a UUID nor an operator's witness id", id))
	}
	return strings.ToLower(id), false, nil
}

func (s *Service) getWitness(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	id, _, err := witnessID(c)
	if err != nil {
		return err
	}
	list, err := s.witnessesOf(c.UserContext(), org.ID)
	if err != nil {
		return httpError(err)
	}
	i := slices.IndexFunc(list, func(r witnessReply) bool { return r.ID == id })
	if i < 0 {
		return httpError(fmt.Errorf("%w: witness %s", cpstate.ErrNotFound, id))
	}
	return httpapi.Reply(c, fiber.StatusOK, list[i])
}

// checkWitness validates a witness's body: the key, then the URL (the
// egress guard included); a name that does not resolve now is a warning.
func (s *Service) checkWitness(ctx context.Context, rawURL, vkey string) (witness.Witness, []string, error) {
	if strings.TrimSpace(vkey) == "" {
		return witness.Witness{}, nil, cpstate.Invalid("vkey", "required: the witness's cosigning key as a C2SP note verifier key (name+hash+base64)")
	}
	if _, err := tlog.ParseWitnessKey(strings.TrimSpace(vkey)); err != nil {
		return witness.Witness{}, nil, cpstate.Invalid("vkey", "%v: the witness's cosignature/v1 verifier key (name+hash+base64 of 0x04 and the Ed25519 key) is required", err)
	}
	rawURL = strings.TrimSpace(rawURL)
	if rawURL == "" {
		return witness.Witness{}, nil, cpstate.Invalid("url", "required: the witness's submission prefix (it takes <url>/add-checkpoint)")
	}
	if len(rawURL) > maxWitnessURL {
		return witness.Witness{}, nil, cpstate.Invalid("url", "at most %d bytes", maxWitnessURL)
	}
	w, err := witness.New(rawURL, vkey)
	if err != nil {
		return witness.Witness{}, nil, cpstate.Invalid("url", "%v", strings.TrimPrefix(err.Error(), witness.ErrInvalid.Error()+": "))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch err := s.egressGuard().CheckURL(ctx, w.URL); {
	case err == nil:
		return w, nil, nil
	case errors.Is(err, egress.ErrRefused):
		return witness.Witness{}, nil, cpstate.Invalid("url", "%v: witnesses must be on public addresses", err)
	case errors.Is(err, egress.ErrUnresolved):
		return w, []string{"url: the host name does not resolve now"}, nil
	default:
		return witness.Witness{}, nil, cpstate.Invalid("url", "%v", err)
	}
}

func (s *Service) createWitness(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var in struct {
		URL  string `json:"url"`
		VKey string `json:"vkey"`
	}
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	w, warnings, err := s.checkWitness(c.UserContext(), in.URL, in.VKey)
	if err != nil {
		return httpError(err)
	}
	vkey := w.Key.String()
	// The operator's witnesses cosign every checkpoint already: the same
	// key twice would be submitted to twice.
	ctx, cancel := context.WithTimeout(c.UserContext(), 5*time.Second)
	ops, err := s.operatorWitnesses(ctx)
	cancel()
	if err != nil {
		s.log.Warn("witness: the operator's witnesses cannot be read; not compared", "org", org.ID, "err", err)
	}
	for _, o := range ops {
		if o.VKey == vkey {
			return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("vkey: %s is one of the operator's witnesses (%s): it cosigns the organization's checkpoints already", w.Key.Name, o.ID))
		}
	}
	key := cpstate.WitnessesKey(org.ID.String())
	defer s.lock(key)()
	own, rev, err := cpstate.WitnessesOf(s.state, org.ID)
	if err != nil {
		return httpError(err)
	}
	for _, o := range own {
		if o.VKey == vkey {
			return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("vkey: %s is a witness of the organization already (%s)", w.Key.Name, o.ID))
		}
	}
	if len(own) >= cpstate.MaxWitnesses {
		return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("the organization has %d witnesses, the most it may add: delete one first", len(own)))
	}
	nw := cpstate.Witness{ID: uuid.New(), OrgID: org.ID, URL: w.URL, VKey: vkey, Name: w.Key.Name, CreatedAt: s.now().UTC()}
	next := cpstate.OrgWitnesses{Witnesses: append(slices.Clone(own), nw)}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: nw.ID.String(), ResourceDisplay: "witness " + nw.Name, OrgID: org.ID, After: nw},
		cpstate.SetKey(key, next, rev)); err != nil {
		return httpError(err)
	}
	r := withStatus(orgWitnessReply(nw), org.ID, nil)
	r.Warnings = warnings
	return httpapi.Reply(c, fiber.StatusCreated, r)
}

// deleteWitness removes one of the organization's witnesses: the
// checkpointer sends it none of the checkpoints signed after (204). An
// operator's witness is the deployment's: 403.
func (s *Service) deleteWitness(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	id, operator, err := witnessID(c)
	if err != nil {
		return err
	}
	if operator {
		return fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("witness %s is one of the operator's witnesses (auditrail tlog --witness): only the operator removes it", id))
	}
	key := cpstate.WitnessesKey(org.ID.String())
	defer s.lock(key)()
	own, rev, err := cpstate.WitnessesOf(s.state, org.ID)
	if err != nil {
		return httpError(err)
	}
	i := slices.IndexFunc(own, func(w cpstate.Witness) bool { return w.ID.String() == id })
	if i < 0 {
		return httpError(fmt.Errorf("%w: witness %s", cpstate.ErrNotFound, id))
	}
	gone := own[i]
	write := cpstate.DeleteKey(key, rev)
	if len(own) > 1 {
		write = cpstate.SetKey(key, cpstate.OrgWitnesses{Witnesses: slices.Delete(slices.Clone(own), i, i+1)}, rev)
	}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: gone.ID.String(), ResourceDisplay: "witness " + gone.Name, OrgID: org.ID, Before: gone}, write); err != nil {
		return httpError(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}
