// Package hookproxy is the platform's client of customer webhook servers:
// it calls the access, pre and post hooks of an execution in order, with
// bearer or mTLS authentication, one deadline per call, bounded retries
// on transient failures, a circuit breaker per hook and point, and the
// fail-open / fail-closed failure modes. Every connection passes an egress
// guard (internal/egress), and callers see generic failures ("endpoint not
// reachable") while the operator log has the detail.
package hookproxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Point is a hook point.
type Point string

// Hook points.
const (
	Access Point = "access"
	Pre    Point = "pre"
	Post   Point = "post"
)

// FailureMode decides a call whose hook failed.
type FailureMode string

// Failure modes.
const (
	FailOpen   FailureMode = "fail_open"
	FailClosed FailureMode = "fail_closed"
)

// ErrInvalidHook is returned for a hook that cannot be called.
var ErrInvalidHook = errors.New("invalid hook")

// PointConfig configures one point of a hook.
type PointConfig struct {
	Path        string
	Timeout     time.Duration
	FailureMode FailureMode
}

// Hook is one configured webhook server.
type Hook struct {
	ID   string
	Name string
	// Revision changes whenever the configuration does; clients and breakers
	// are rebuilt for a new revision.
	Revision string
	// Project is true for a project hook; org hooks run before (Phase
	// "before") or after ("after") the project hooks.
	Project  bool
	Phase    string
	Priority int
	Endpoint string
	Points   map[Point]PointConfig
	// Contract is the shape of the requests ("" or ContractAuditrail:
	// seeds/001; ContractArcade: Arcade's logic-extensions schema).
	Contract Contract
	// Bearer token and/or client certificate (mTLS) with an optional CA;
	// both are sent when both are set.
	BearerToken   string
	ClientCertPEM string
	ClientKeyPEM  string
	CACertPEM     string
	// MaxAttempts in all (1 = no retry; at most MaxAttempts) and the first
	// back-off, doubled per retry up to MaxBackoff, with ±20 % jitter.
	MaxAttempts int
	Backoff     time.Duration
	// The breaker opens after ConsecutiveFailures and half-opens after OpenFor.
	ConsecutiveFailures int
	OpenFor             time.Duration
}

// tlsConfig returns the client TLS configuration of the hook.
func (h Hook) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if h.ClientCertPEM != "" {
		cert, err := tls.X509KeyPair([]byte(h.ClientCertPEM), []byte(h.ClientKeyPEM))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: client certificate: %v", ErrInvalidHook, h.Name, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if h.CACertPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(h.CACertPEM)) {
			return nil, fmt.Errorf("%w: %s: no CA certificate in ca_cert_pem", ErrInvalidHook, h.Name)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Order sorts hooks as they run: org hooks of phase "before", then project
// hooks, then org hooks of phase "after", each by ascending priority (then
// name and id, so that the order is stable).
func Order(hooks []Hook) []Hook {
	if len(hooks) < 2 {
		return hooks
	}
	rank := func(h Hook) int {
		switch {
		case h.Project:
			return 1
		case h.Phase == "after":
			return 2
		}
		return 0
	}
	out := append([]Hook(nil), hooks...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return out
}
