package controlplane

// The refresh service: a tool runner (a read-only state, whose NATS
// credentials may not publish to the control-plane bucket) asks the control
// plane to refresh a user's connection; the control plane calls the provider,
// stores the new sealed tokens with its compare-and-set, and answers with the
// access token sealed for the reply. Only the control plane writes the bucket.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/oauthflow"
)

// ConnRefreshSubject is the subject of the control plane's refresh service
// (natsx.ConnRefreshSubject): the control plane subscribes to it, the tool
// runner may publish requests to it.
const ConnRefreshSubject = "auditrail.cp.conn.refresh"

// connRefreshQueue is the queue group of the control-plane instances: one
// of them answers each request.
const connRefreshQueue = "auditrail-controlplane"

// refreshReplyMargin is how much longer than a refresh (refreshTimeout) a
// tool runner waits for the control plane's answer.
const refreshReplyMargin = 5 * time.Second

// maxServedRefreshes bounds the refreshes one control-plane instance runs at
// once for the tool runners; further requests wait.
const maxServedRefreshes = 64

// connRefreshRequest names the connection to refresh; the control plane
// builds its key (a request cannot name another key).
type connRefreshRequest struct {
	Org      string `json:"org"`
	Project  string `json:"project"`
	User     string `json:"user"`
	Provider string `json:"provider"`
}

// connRefreshReply is the answer: the usable connection sealed under
// refreshReplyKey of its key, or an error and its code.
type connRefreshReply struct {
	Sealed []byte `json:"sealed,omitempty"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
}

// refreshedConn is what a reply seals.
type refreshedConn struct {
	AccessToken string     `json:"access_token"`
	Scopes      []string   `json:"scopes,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// The error codes of a reply, each the sentinel the tool runner's error
// wraps (refreshFailed: none, the tool runner reports a failure).
const (
	refreshNotConnected = "not_connected"
	refreshNoProvider   = "no_provider"
	refreshNotOAuth     = "oauth_not_configured"
	refreshInvalid      = "invalid"
	refreshFailed       = "failed"
)

var refreshCodes = []struct {
	code string
	err  error
}{
	{refreshNotConnected, ErrNotConnected},
	{refreshNoProvider, oauthflow.ErrNoProvider},
	{refreshNotOAuth, ErrOAuthNotConfigured},
	{refreshInvalid, cpstate.ErrInvalid},
}

// refreshReplyKey is the associated data of a reply's seal: not a bucket
// key, so that a reply cannot pass for a stored value nor the reverse.
func refreshReplyKey(key string) string { return "refresh-reply:" + key }

// remoteError is an error the control plane answered: its message, and the
// sentinel of its code.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// replyInbox reports whether a reply subject is a requester's inbox: the
// control plane's credentials may publish to the bucket and the event
// subjects, so it answers nowhere else (a request whose reply subject is
// $KV.… would otherwise have it write there).
func replyInbox(subject string) bool {
	return (strings.HasPrefix(subject, "_INBOX.") || strings.HasPrefix(subject, "_INBOX_")) && !strings.ContainsAny(subject, "*> \t\r\n")
}

// ServeConnRefresh answers the tool runners' refresh requests on
// ConnRefreshSubject until ctx ends (Run serves it on a writable state).
// A request names org, project, user and provider; the connection is
// refreshed as Connection does it (only when due, once at a time) and
// stored, and the reply carries the access token sealed with the secrets
// keys. A read-only state serves nothing: ErrReadOnly.
func (s *Service) ServeConnRefresh(ctx context.Context) error {
	if s.state.ReadOnly() {
		return fmt.Errorf("%w: only the control plane refreshes connections", cpstate.ErrReadOnly)
	}
	sem := make(chan struct{}, maxServedRefreshes)
	var (
		mu     sync.Mutex
		closed bool
		wg     sync.WaitGroup
	)
	sub, err := s.state.Conn().QueueSubscribe(ConnRefreshSubject, connRefreshQueue, func(m *nats.Msg) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		mu.Lock()
		if closed {
			mu.Unlock()
			<-sem
			return
		}
		wg.Add(1)
		mu.Unlock()
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.answerRefresh(ctx, m)
		}()
	})
	if err != nil {
		return fmt.Errorf("serve %s: %w", ConnRefreshSubject, err)
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	mu.Lock()
	closed = true
	mu.Unlock()
	wg.Wait()
	return nil
}

// answerRefresh refreshes the connection a request names and answers.
func (s *Service) answerRefresh(ctx context.Context, m *nats.Msg) {
	if !replyInbox(m.Reply) {
		s.log.Warn("connection refresh request refused: its reply subject is not an inbox", "reply", m.Reply)
		return
	}
	var r connRefreshReply
	c, key, err := s.refreshFor(ctx, m.Data)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(refreshedConn{AccessToken: c.AccessToken, Scopes: c.Scopes, ExpiresAt: c.ExpiresAt}); err == nil {
			r.Sealed, err = s.sealer.Seal(refreshReplyKey(key), b)
		}
	}
	if err != nil {
		r = connRefreshReply{Code: refreshFailed, Error: err.Error()}
		for _, c := range refreshCodes {
			if errors.Is(err, c.err) {
				r.Code = c.code
				break
			}
		}
	}
	b, _ := json.Marshal(r)
	if err := m.Respond(b); err != nil {
		s.log.Warn("connection refresh: reply not sent", "err", err)
	}
}

// refreshFor decodes a request and refreshes its connection.
func (s *Service) refreshFor(ctx context.Context, data []byte) (oauthflow.Connection, string, error) {
	var req connRefreshRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return oauthflow.Connection{}, "", fmt.Errorf("%w: refresh request: %v", cpstate.ErrInvalid, err)
	}
	_, err1 := uuid.Parse(req.Org)
	_, err2 := uuid.Parse(req.Project)
	if err1 != nil || err2 != nil || req.User == "" || req.Provider == "" {
		return oauthflow.Connection{}, "", fmt.Errorf("%w: refresh request: organization and project UUIDs, user and provider required", cpstate.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	c, err := s.connection(ctx, req.Org, req.Project, req.User, req.Provider)
	return c, cpstate.ConnKey(req.Org, req.Project, req.User, req.Provider), err
}

// refreshByControlPlane is the refresh of a read-only state: the control
// plane refreshes and stores the tokens, and answers the access token.
func (s *Service) refreshByControlPlane(ctx context.Context, org, project, user, provider string) (oauthflow.Connection, error) {
	b, err := json.Marshal(connRefreshRequest{Org: org, Project: project, User: user, Provider: provider})
	if err != nil {
		return oauthflow.Connection{}, err
	}
	r, err := s.askControlPlane(ctx, b)
	if err != nil {
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: the control plane did not answer: %w", provider, err)
	}
	if r.Code != "" {
		e := &remoteError{msg: r.Error}
		for _, c := range refreshCodes {
			if c.code == r.Code {
				e.kind = c.err
			}
		}
		return oauthflow.Connection{}, e
	}
	pt, err := s.sealer.Open(refreshReplyKey(cpstate.ConnKey(org, project, user, provider)), r.Sealed)
	if err != nil {
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: the control plane's answer: %w", provider, err)
	}
	var c refreshedConn
	if err := json.Unmarshal(pt, &c); err != nil {
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: the control plane's answer: %w", provider, err)
	}
	return oauthflow.Connection{AccessToken: c.AccessToken, Scopes: c.Scopes, ExpiresAt: c.ExpiresAt}, nil
}

// askControlPlane sends a refresh request and waits for the control plane's
// answer. Another answer on the inbox — the acknowledgement of a stream
// that captures the subject — is not the control plane's: it is skipped.
func (s *Service) askControlPlane(ctx context.Context, req []byte) (connRefreshReply, error) {
	nc := s.state.Conn()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return connRefreshReply{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(ConnRefreshSubject, inbox, req); err != nil {
		return connRefreshReply{}, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return connRefreshReply{}, err
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" { // no responders
			return connRefreshReply{}, nats.ErrNoResponders
		}
		var r connRefreshReply
		if json.Unmarshal(m.Data, &r) == nil && (r.Code != "" || len(r.Sealed) > 0) {
			return r, nil
		}
	}
}
