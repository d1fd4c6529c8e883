package controlplane

// The admin routes of push destinations (CONTRACT.md "Delivery to pollers
// and SIEMs"): owners and admins only, every change recorded as
// RESOURCE_TYPE_SETTING without the secret or token.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// destinationInput is the body of a create, and the document a PATCH
// (JSON merge patch) applies to.
type destinationInput struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	URL    string `json:"url"`
	Format string `json:"format"`
	Q      string `json:"q"`
	Secret string `json:"secret,omitempty"`
	Token  string `json:"token,omitempty"`
}

// Bounds of a destination's fields.
const (
	maxDestURL    = 2048
	minDestSecret = 16
	maxDestSecret = 1024
)

// normalize fills the defaults and validates; errors wrap ErrInvalid and
// name the field.
func (in *destinationInput) normalize() error {
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > 200 {
		return cpstate.Invalid("name", "required, at most 200 characters")
	}
	if in.Type != DestHTTPS && in.Type != DestSplunkHEC {
		return cpstate.Invalid("type", "%q is not https or splunk_hec", in.Type)
	}
	if in.Format == "" {
		in.Format = FormatJSON
	}
	if in.Format != FormatJSON && in.Format != FormatOCSF {
		return cpstate.Invalid("format", "%q is not json or ocsf", in.Format)
	}
	if err := checkDestinationURL(in.URL); err != nil {
		return err
	}
	in.Q = strings.TrimSpace(in.Q)
	if _, _, err := DestinationFilter(in.Q); err != nil {
		return cpstate.Invalid("q", "%v", err)
	}
	if in.Secret == cpstate.Redacted || in.Token == cpstate.Redacted {
		return cpstate.Invalid("secret", "%s is the placeholder of a stored secret, not a secret", cpstate.Redacted)
	}
	if in.Secret != "" && (len(in.Secret) < minDestSecret || len(in.Secret) > maxDestSecret) {
		return cpstate.Invalid("secret", "%d to %d characters", minDestSecret, maxDestSecret)
	}
	if len(in.Token) > maxDestSecret {
		return cpstate.Invalid("token", "at most %d characters", maxDestSecret)
	}
	switch {
	case in.Type == DestHTTPS && in.Secret == "":
		return cpstate.Invalid("secret", "required for type https: the key of Auditrail-Signature (at least %d characters)", minDestSecret)
	case in.Type == DestHTTPS && in.Token != "":
		return cpstate.Invalid("token", "only for type splunk_hec")
	case in.Type == DestSplunkHEC && in.Token == "":
		return cpstate.Invalid("token", "required for type splunk_hec: the HEC token")
	}
	return nil
}

// checkDestinationURL accepts https URLs, and http ones to a loopback
// address literal (a receiver on the same machine, for development); no
// user information (it would be shown), at most maxDestURL bytes.
func checkDestinationURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || len(raw) > maxDestURL || u.User != nil || u.Fragment != "" {
		return cpstate.Invalid("url", "an absolute https URL without user information, at most %d bytes", maxDestURL)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.IsLoopback() {
			return nil
		}
	}
	return cpstate.Invalid("url", "%q is not an https URL (http only to a loopback address)", u.Scheme+"://"+u.Host)
}

// DestinationFilter is destination.Filter.
func DestinationFilter(q string) (audit, executions *search.Query, err error) {
	return destination.Filter(q)
}

// destinationView is a destination as the API and audit events show it.
type destinationView struct {
	Destination
	Secret string `json:"secret,omitempty"`
	Token  string `json:"token,omitempty"`
}

func destView(d Destination) any {
	v := destinationView{Destination: d}
	v.Sealed = nil
	if d.SecretSet {
		v.Secret = cpstate.Redacted
	}
	if d.TokenSet {
		v.Token = cpstate.Redacted
	}
	return v
}

// destinationReply is the answer of GET …/destinations/{id}: the
// destination and its delivery.
type destinationReply struct {
	destinationView
	Status          string     `json:"status"`
	LastDeliveredAt *time.Time `json:"last_delivered_at"`
	LagSeconds      float64    `json:"lag_seconds"`
	Pending         uint64     `json:"pending"`
	Failures        int        `json:"failures"`
	LastError       string     `json:"last_error"`
	Delivered       uint64     `json:"delivered"`
	StatusUpdatedAt *time.Time `json:"status_updated_at"`
	Warnings        []string   `json:"warnings,omitempty"`
}

// sealDestination stores in's secrets sealed in d.
func (s *Service) sealDestination(key string, d *Destination, in destinationInput) error {
	b, _ := json.Marshal(DestinationSecrets{Secret: in.Secret, Token: in.Token})
	sealed, err := s.sealer.Seal(key, b)
	if err != nil {
		return err
	}
	d.Sealed, d.SecretSet, d.TokenSet = sealed, in.Secret != "", in.Token != ""
	return nil
}

// checkDestinationEgress refuses (400, field url) a url whose address is
// refused by the egress guard; a name that does not resolve now is a
// warning. Every connection is checked again when made.
func (s *Service) checkDestinationEgress(ctx context.Context, raw string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.egressGuard().CheckURL(ctx, raw)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, egress.ErrRefused):
		return nil, cpstate.Invalid("url", "%v: destinations must be on public addresses", err)
	case errors.Is(err, egress.ErrUnresolved):
		return []string{"url: the host name does not resolve now"}, nil
	}
	return nil, cpstate.Invalid("url", "%v", err)
}

// registerDestinations mounts the destination routes.
func (s *Service) registerDestinations(v routes) {
	base := "/orgs/:org_id/destinations"
	v.Get(base, s.listDestinations)
	v.Post(base, s.createDestination)
	v.Get(base+"/:destination_id", s.getDestination)
	v.Patch(base+"/:destination_id", s.patchDestination)
	v.Delete(base+"/:destination_id", s.deleteDestination)
	v.Post(base+"/:destination_id/pause", s.pauseDestination)
	v.Post(base+"/:destination_id/resume", s.resumeDestination)
	v.Post(base+"/:destination_id/replay", s.replayDestination)
}

func (s *Service) listDestinations(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	return listItems(s, c, cpstate.DestinationPrefix+org.ID.String()+".", destView)
}

func (s *Service) createDestination(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var in destinationInput
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	if err := in.normalize(); err != nil {
		return httpError(err)
	}
	warnings, err := s.checkDestinationEgress(c.UserContext(), in.URL)
	if err != nil {
		return httpError(err)
	}
	now := s.now().UTC()
	d := Destination{ID: uuid.New(), OrgID: org.ID, Name: in.Name, Type: in.Type, URL: in.URL, Format: in.Format, Q: in.Q,
		StartAt: now, CreatedAt: now, UpdatedAt: now}
	key := cpstate.DestinationKey(org.ID.String(), d.ID.String())
	if err := s.sealDestination(key, &d, in); err != nil {
		return err
	}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: d.ID.String(), ResourceDisplay: "destination " + d.Name, OrgID: org.ID, After: destView(d)},
		cpstate.SetKey(key, d, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, destinationReply{destinationView: destView(d).(destinationView), Status: DeliveryStarting, Warnings: warnings})
}

// destinationTarget resolves the destination of a route: its key and the
// mutation that names it.
func (s *Service) destinationTarget(c *fiber.Ctx) (*call, string, Destination, producers.Mutation, error) {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return nil, "", Destination{}, producers.Mutation{}, err
	}
	id, err := uuidParam(c, "destination_id")
	if err != nil {
		return nil, "", Destination{}, producers.Mutation{}, err
	}
	key := cpstate.DestinationKey(org.ID.String(), id.String())
	var d Destination
	if _, err := s.state.Get(key, &d); err != nil {
		return nil, "", Destination{}, producers.Mutation{}, httpError(fmt.Errorf("%w: destination %s", cpstate.ErrNotFound, id))
	}
	mut := producers.Mutation{Action: schemas.AuditActionUpdated, ResourceType: schemas.ResourceTypeSetting, ResourceID: id.String(),
		ResourceDisplay: "destination " + d.Name, OrgID: org.ID}
	return cl, key, d, mut, nil
}

func (s *Service) getDestination(c *fiber.Ctx) error {
	_, _, d, _, err := s.destinationTarget(c)
	if err != nil {
		return err
	}
	out := destinationReply{destinationView: destView(d).(destinationView), Status: DeliveryStarting}
	ctx, cancel := context.WithTimeout(c.UserContext(), 5*time.Second)
	defer cancel()
	st, err := s.state.DeliveryStatus(ctx, d.ID)
	if err != nil {
		s.log.Warn("delivery status unavailable", "destination", d.ID, "err", err)
	}
	if st != nil {
		out.LastDeliveredAt, out.Delivered, out.StatusUpdatedAt = st.LastDeliveredAt, st.Delivered, &st.UpdatedAt
		if st.Generation == d.Generation {
			out.Status, out.Pending, out.Failures, out.LastError = st.State, st.Pending, st.Failures, st.LastError
			if st.Pending > 0 && st.OldestPending != nil {
				out.LagSeconds = max(0, s.now().Sub(*st.OldestPending).Seconds())
			}
		}
	}
	if d.Paused {
		out.Status = DeliveryPaused
	}
	return httpapi.Reply(c, fiber.StatusOK, out)
}

// patchDestination applies a JSON merge patch (RFC 7386) to the
// destination's settings; a secret or token left out is kept.
func (s *Service) patchDestination(c *fiber.Ctx) error {
	cl, key, _, mut, err := s.destinationTarget(c)
	if err != nil {
		return err
	}
	var patch map[string]json.RawMessage
	if err := decodeBody(c, &patch); err != nil {
		return err
	}
	var warnings []string
	var after Destination
	err = updateRecorded(s, cl, key, "destination "+mut.ResourceID, mut, destView, func(d Destination) (Destination, bool, error) {
		sec, err := cpstate.OpenDestination(s.sealer, key, d)
		if err != nil {
			return d, false, fmt.Errorf("open destination secrets: %w", err)
		}
		cur := destinationInput{Name: d.Name, Type: d.Type, URL: d.URL, Format: d.Format, Q: d.Q, Secret: sec.Secret, Token: sec.Token}
		curJSON, _ := json.Marshal(cur)
		merged, err := mergePatch(curJSON, c.Body())
		if err != nil {
			return d, false, cpstate.Invalid("body", "%v", err)
		}
		var next destinationInput
		dec := json.NewDecoder(bytes.NewReader(merged))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&next); err != nil {
			return d, false, cpstate.Invalid("body", "%v", err)
		}
		if next.Type == DestHTTPS {
			next.Token = "" // a token left from a splunk_hec destination
		}
		if err := next.normalize(); err != nil {
			return d, false, err
		}
		if next == cur {
			return d, false, nil
		}
		if next.URL != cur.URL {
			if warnings, err = s.checkDestinationEgress(c.UserContext(), next.URL); err != nil {
				return d, false, err
			}
		}
		d.Name, d.Type, d.URL, d.Format, d.Q = next.Name, next.Type, next.URL, next.Format, next.Q
		d.UpdatedAt = s.now().UTC()
		if err := s.sealDestination(key, &d, next); err != nil {
			return d, false, err
		}
		after = d
		return d, true, nil
	})
	if err != nil || len(warnings) == 0 {
		return err
	}
	return httpapi.Reply(c, fiber.StatusOK, destinationReply{destinationView: destView(after).(destinationView), Status: DeliveryStarting, Warnings: warnings})
}

func (s *Service) deleteDestination(c *fiber.Ctx) error {
	cl, key, _, mut, err := s.destinationTarget(c)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, key, "destination "+mut.ResourceID, mut, destView, nil)
}

func (s *Service) pauseDestination(c *fiber.Ctx) error  { return s.setPaused(c, true) }
func (s *Service) resumeDestination(c *fiber.Ctx) error { return s.setPaused(c, false) }

// setPaused pauses (the delivery holds: events wait in the stream) or
// resumes a destination; UPDATED with paused in before and after.
func (s *Service) setPaused(c *fiber.Ctx, paused bool) error {
	cl, key, _, mut, err := s.destinationTarget(c)
	if err != nil {
		return err
	}
	return updateRecorded(s, cl, key, "destination "+mut.ResourceID, mut, destView, func(d Destination) (Destination, bool, error) {
		if d.Paused == paused {
			return d, false, nil
		}
		d.Paused, d.UpdatedAt = paused, s.now().UTC()
		return d, true, nil
	})
}

// replayDestination restarts the delivery from the events persisted at or
// after since (the stream's time): a new generation, whose consumer the
// delivery role creates, replacing the current one.
func (s *Service) replayDestination(c *fiber.Ctx) error {
	cl, key, _, mut, err := s.destinationTarget(c)
	if err != nil {
		return err
	}
	var body struct {
		Since string `json:"since"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	since, err := time.Parse(time.RFC3339Nano, body.Since)
	if err != nil {
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("since: %q is not an RFC 3339 time", body.Since))
	}
	if since.After(s.now().Add(time.Minute)) {
		return fiber.NewError(fiber.StatusBadRequest, "since: in the future")
	}
	return updateRecorded(s, cl, key, "destination "+mut.ResourceID, mut, destView, func(d Destination) (Destination, bool, error) {
		d.Generation++
		d.StartAt, d.UpdatedAt = since.UTC(), s.now().UTC()
		return d, true, nil
	})
}
