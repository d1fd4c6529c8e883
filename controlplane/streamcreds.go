package controlplane

// Stream credentials in the state: the record of each (never its secret),
// and the sweep that deletes the consumers of revoked and expired ones.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/google/uuid"
)

// StreamCredentials signs an organization's credentials of the event
// stream and manages their consumers (natsx, wired by cmd).
type StreamCredentials interface {
	// Issue returns the NATS credentials file of credential id of org,
	// valid until expires (enforced by NATS), and its user's public key.
	Issue(org, id string, expires time.Time) (creds []byte, user string, err error)
	// CreateConsumer creates the credential's consumer: a durable pull
	// consumer of the organization's subjects, the only one it may use.
	CreateConsumer(ctx context.Context, org, id, name string) error
	// DeleteConsumer deletes it (no error when it does not exist): the
	// credential reaches nothing any more.
	DeleteConsumer(ctx context.Context, id string) error
}

// The names a stream credential uses (natsx.StreamConsumer,
// natsx.StreamInboxPrefix, schemas.StreamEvents).
const (
	streamName           = "AUDITRAIL_EVENTS"
	streamConsumerPrefix = "siem-"
	streamInboxPrefix    = "_INBOX_siem-"
)

// Bounds of a stream credential.
const (
	// MaxStreamCredentialLifetime is the furthest expires_at may be.
	MaxStreamCredentialLifetime = 366 * 24 * time.Hour
	// MaxStreamCredentials is how many unexpired, unrevoked credentials an
	// organization may hold (each has a consumer on the event stream).
	MaxStreamCredentials = 100
)

// streamCredView is a credential as the API and audit events show it,
// with its status at now: active, expired or revoked.
type streamCredView struct {
	cpstate.StreamCredential
	Status string `json:"status"`
}

func streamCredStatus(c cpstate.StreamCredential, now time.Time) string {
	switch {
	case c.RevokedAt != nil:
		return "revoked"
	case !now.Before(c.ExpiresAt):
		return "expired"
	}
	return "active"
}

// UseStreamCredentials enables the stream-credential routes (without it
// they answer 503). Call before Register.
func (s *Service) UseStreamCredentials(sc StreamCredentials) { s.streamCreds = sc }

// SweepStreamCredentials deletes the consumers of revoked and expired
// credentials that this process has not deleted yet: a revocation whose
// consumer deletion was cut short (a crash, NATS down) completes here, and
// expired credentials leave nothing on the stream.
func (s *Service) SweepStreamCredentials(ctx context.Context) error {
	if s.streamCreds == nil {
		return nil
	}
	creds, err := cpstate.ListAs[cpstate.StreamCredential](s.state, "streamcred.")
	if err != nil {
		return err
	}
	now := s.now()
	var firstErr error
	for _, c := range creds {
		if streamCredStatus(c, now) == "active" {
			continue
		}
		if _, done := s.sweptCreds.Load(c.ID); done {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.streamCreds.DeleteConsumer(dctx, c.ID.String())
		cancel()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		s.sweptCreds.Store(c.ID, true)
	}
	return firstErr
}

// RunStreamCredentials sweeps at once and then every interval until ctx ends.
func (s *Service) RunStreamCredentials(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := s.SweepStreamCredentials(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("stream credentials: consumer cleanup", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// activeStreamCreds counts the organization's active credentials.
func (s *Service) activeStreamCreds(org string) (int, error) {
	creds, err := cpstate.ListAs[cpstate.StreamCredential](s.state, "streamcred."+org+".")
	if err != nil {
		return 0, err
	}
	n, now := 0, s.now()
	for _, c := range creds {
		if streamCredStatus(c, now) == "active" {
			n++
		}
	}
	return n, nil
}

// ActiveStreamCredential returns the organization and name of stream
// credential id when its NATS user is user and it is active: the
// consumer proxy (natsx.StreamConsumerProxy) asks before it creates or
// deletes the credential's consumer. With current, it first waits until
// the state holds every change committed before the call, a revocation
// by another instance included.
func (s *Service) ActiveStreamCredential(ctx context.Context, id, user string, current bool) (org, name string, err error) {
	if current {
		if err := s.state.WaitCurrent(ctx); err != nil {
			return "", "", fmt.Errorf("%w: state not current: %w", cpstate.ErrUnavailabe, err)
		}
	}
	if _, err := uuid.Parse(id); err != nil {
		return "", "", errors.New("unknown credential")
	}
	var rec cpstate.StreamCredential
	found := false
	for _, k := range s.state.Keys("streamcred.") {
		if strings.HasSuffix(k, "."+id) {
			if _, err := s.state.Get(k, &rec); err == nil {
				found = true
			}
			break
		}
	}
	switch {
	case !found || rec.User != user:
		return "", "", errors.New("unknown credential")
	case streamCredStatus(rec, s.now()) != "active":
		return "", "", fmt.Errorf("credential %s", streamCredStatus(rec, s.now()))
	}
	return rec.OrgID.String(), rec.Name, nil
}
