package controlplane

// The stream-credential routes: an organization's owners and admins issue
// NATS credentials that read only that organization's events, list them
// and revoke them.

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func (s *Service) registerStreamCredentials(v routes) {
	v.Get("/orgs/:org_id/stream_credentials", s.listStreamCredentials)
	v.Post("/orgs/:org_id/stream_credentials", s.createStreamCredential)
	v.Get("/orgs/:org_id/stream_credentials/:credential_id", s.getStreamCredential)
	v.Delete("/orgs/:org_id/stream_credentials/:credential_id", s.revokeStreamCredential)
}

// viewStreamCred shows a credential with its status now.
func (s *Service) viewStreamCred(c cpstate.StreamCredential) any {
	return streamCredView{StreamCredential: c, Status: streamCredStatus(c, s.now())}
}

// streamCredScope authorizes an owner or admin of the organization (reads
// too: the list says who can read the organization's stream) and checks
// that stream credentials are configured.
func (s *Service) streamCredScope(c *fiber.Ctx) (*call, cpstate.Org, error) {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return nil, cpstate.Org{}, err
	}
	if s.streamCreds == nil {
		return nil, cpstate.Org{}, fiber.NewError(fiber.StatusServiceUnavailable, "stream credentials are not configured on this control plane (--nats-stream-key)")
	}
	return cl, org, nil
}

func (s *Service) listStreamCredentials(c *fiber.Ctx) error {
	_, org, err := s.streamCredScope(c)
	if err != nil {
		return err
	}
	return listItems(s, c, "streamcred."+org.ID.String()+".", s.viewStreamCred)
}

func (s *Service) getStreamCredential(c *fiber.Ctx) error {
	_, org, err := s.streamCredScope(c)
	if err != nil {
		return err
	}
	id, err := uuidParam(c, "credential_id")
	if err != nil {
		return err
	}
	var rec cpstate.StreamCredential
	if _, err := s.state.Get(cpstate.StreamCredKey(org.ID.String(), id.String()), &rec); err != nil {
		return httpError(fmt.Errorf("%w: stream credential %s", cpstate.ErrNotFound, id))
	}
	return httpapi.Reply(c, fiber.StatusOK, s.viewStreamCred(rec))
}

// parseExpiry checks expires_at: required, in the future, at most
// MaxStreamCredentialLifetime ahead; whole seconds (a JWT's exp).
func (s *Service) parseExpiry(v *time.Time) (time.Time, error) {
	if v == nil {
		return time.Time{}, cpstate.Invalid("expires_at", "required (RFC 3339; at most %d days ahead)", int(MaxStreamCredentialLifetime/(24*time.Hour)))
	}
	now := s.now()
	exp := v.UTC().Truncate(time.Second)
	switch {
	case !exp.After(now):
		return time.Time{}, cpstate.Invalid("expires_at", "must be in the future")
	case exp.After(now.Add(MaxStreamCredentialLifetime)):
		return time.Time{}, cpstate.Invalid("expires_at", "at most %d days ahead", int(MaxStreamCredentialLifetime/(24*time.Hour)))
	}
	return exp, nil
}

// createStreamCredential creates the credential's consumer, records the
// credential (never its secret) with its audit event and answers the
// credentials file once.
func (s *Service) createStreamCredential(c *fiber.Ctx) error {
	cl, org, err := s.streamCredScope(c)
	if err != nil {
		return err
	}
	var body struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name)
	if err != nil {
		return httpError(err)
	}
	exp, err := s.parseExpiry(body.ExpiresAt)
	if err != nil {
		return httpError(err)
	}
	orgID := org.ID.String()
	if n, err := s.activeStreamCreds(orgID); err != nil {
		return err
	} else if limit := cmp.Or(s.maxCreds, MaxStreamCredentials); n >= limit {
		return httpError(fmt.Errorf("%w: the organization holds %d active stream credentials, the most allowed; revoke one", cpstate.ErrConflict, n))
	}
	id := uuid.New()
	creds, user, err := s.streamCreds.Issue(orgID, id.String(), exp)
	if err != nil {
		return fmt.Errorf("sign stream credential: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 10*time.Second)
	defer cancel()
	if err := s.streamCreds.CreateConsumer(ctx, orgID, id.String(), name); err != nil {
		s.log.Warn("stream credential: create consumer", "err", err)
		return httpError(fmt.Errorf("%w: create the credential's consumer", cpstate.ErrUnavailabe))
	}
	rec := cpstate.StreamCredential{ID: id, OrgID: org.ID, Name: name, User: user, Stream: streamName,
		Subjects: []string{schemas.EventSubject(orgID, ">")}, Consumer: streamConsumerPrefix + id.String(),
		InboxPrefix: streamInboxPrefix + id.String(), ExpiresAt: exp, CreatedAt: s.now().UTC()}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: id.String(), ResourceDisplay: "stream credential " + name, OrgID: org.ID, After: s.viewStreamCred(rec)},
		cpstate.SetKey(cpstate.StreamCredKey(orgID, id.String()), rec, 0)); err != nil {
		// Nothing was recorded: the consumer goes too (the sweep does not
		// know it).
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(c.UserContext()), 10*time.Second)
		defer dcancel()
		if derr := s.streamCreds.DeleteConsumer(dctx, id.String()); derr != nil {
			s.log.Warn("stream credential: delete the consumer of an unrecorded credential", "consumer", rec.Consumer, "err", derr)
		}
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, struct {
		streamCredView
		Creds string `json:"creds"`
	}{s.viewStreamCred(rec).(streamCredView), string(creds)})
}

// revokeStreamCredential deletes the credential's consumer, records the
// revocation, and deletes the consumer again: once answered, the
// credential reaches nothing, and the consumer proxy refuses to create it
// again (a create that the proxy checked before the record and sends after
// the first deletion is undone by the second, or sees the record after it:
// natsx.StreamConsumerProxy). Revoking a revoked credential deletes its
// consumer again and records nothing.
func (s *Service) revokeStreamCredential(c *fiber.Ctx) error {
	cl, org, err := s.streamCredScope(c)
	if err != nil {
		return err
	}
	id, err := uuidParam(c, "credential_id")
	if err != nil {
		return err
	}
	key := cpstate.StreamCredKey(org.ID.String(), id.String())
	var rec cpstate.StreamCredential
	if _, err := s.state.Get(key, &rec); err != nil {
		return httpError(fmt.Errorf("%w: stream credential %s", cpstate.ErrNotFound, id))
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 10*time.Second)
	defer cancel()
	if err := s.streamCreds.DeleteConsumer(ctx, id.String()); err != nil {
		s.log.Warn("stream credential: delete consumer", "err", err)
		return httpError(fmt.Errorf("%w: delete the credential's consumer", cpstate.ErrUnavailabe))
	}
	mut := producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: id.String(), ResourceDisplay: "stream credential " + rec.Name, OrgID: org.ID}
	err = updateRecorded(s, cl, key, "stream credential "+id.String(), mut, s.viewStreamCred, func(rec cpstate.StreamCredential) (cpstate.StreamCredential, bool, error) {
		if rec.RevokedAt != nil {
			return rec, false, nil
		}
		now := s.now().UTC()
		rec.RevokedAt = &now
		return rec, true, nil
	})
	if err := s.streamCreds.DeleteConsumer(ctx, id.String()); err != nil {
		// The sweep deletes it (the record says revoked).
		s.log.Warn("stream credential: delete consumer after the revocation", "err", err)
	}
	return err
}
