// Package mail is the MailToolkit (seeds/002, issue 12): read, search,
// draft, send and reply to the emails of the user's Outlook mailbox and
// browse its folders, through Microsoft Graph v1.0 (the thin client of
// package graphapi) and the user's OAuth connection to the microsoft auth
// provider. Every call goes where the organization's auth provider says
// (its api_base_url; empty: Graph) and every connection passes the egress
// guard, since that URL is chosen by a tenant.
package mail

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/pagetoken"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// Name and Version of the toolkit, and the auth provider it needs. The
// seed leaves the version open: 1.0.0 is this first implementation.
const (
	Name    = "MailToolkit"
	Version = "1.0.0"
	// Provider is the id and type of the auth provider every tool needs.
	Provider = "microsoft"
)

// Delegated permissions of Microsoft Graph the tools ask for (least
// privilege per tool, see defs.go).
const (
	ScopeMailRead            = "Mail.Read"
	ScopeMailReadWrite       = "Mail.ReadWrite"
	ScopeMailSend            = "Mail.Send"
	ScopeUserRead            = "User.Read"
	ScopeMailboxSettingsRead = "MailboxSettings.Read"
)

// Config tunes the toolkit.
type Config struct {
	// HTTPClient, when set, carries every API call instead of the
	// toolkit's own transport (tests); its transport must do its own
	// egress checks.
	HTTPClient *http.Client
	// Egress checks every connection the toolkit's transport opens
	// (nil: egress.Strict()).
	Egress *egress.Guard
	// Timeout bounds one API call.
	Timeout time.Duration
	// Retry bounds the attempts of a throttled (429) or unavailable (503)
	// Graph call; MaxRetryAfter is the longest Retry-After waited for.
	Retry         retry.Policy
	MaxRetryAfter time.Duration
	// Log receives what callers are not told (nil: slog.Default()).
	Log *slog.Logger
	// MaxResponseBytes caps every answer of the provider: the API base is
	// chosen by a tenant, and a longer answer fails the call
	// (provhttp.ErrBodyTooLarge), never the process.
	MaxResponseBytes int64
	// PageTokenKeys sign the listings' pagination tokens
	// (internal/pagetoken): the first signs, every one verifies, each at
	// least 16 bytes. Every instance that may receive a token back must
	// hold the key that signed it.
	PageTokenKeys [][]byte
}

// DefaultConfig: 30 s per API call, strict egress, graphapi's retries,
// answers up to provhttp.DefaultMaxBody (64 MiB), and a random page token
// key of this process only (tokens do not survive a restart nor reach
// another instance: deployments set PageTokenKeys).
func DefaultConfig() Config {
	g := graphapi.DefaultConfig()
	return Config{Timeout: 30 * time.Second, Egress: egress.Strict(), Retry: g.Retry, MaxRetryAfter: g.MaxRetryAfter,
		MaxResponseBytes: provhttp.DefaultMaxBody, PageTokenKeys: [][]byte{randomKey()}}
}

func randomKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return k
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Timeout must be positive", ErrInvalidConfig)
	case c.Retry.MaxAttempts < 1:
		return fmt.Errorf("%w: Retry.MaxAttempts must be at least 1", ErrInvalidConfig)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("%w: MaxRetryAfter is negative", ErrInvalidConfig)
	case c.MaxResponseBytes < 1<<10:
		return fmt.Errorf("%w: MaxResponseBytes must be at least 1 KiB", ErrInvalidConfig)
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := pagetoken.ValidateKeys(c.PageTokenKeys); err != nil {
		return fmt.Errorf("%w: PageTokenKeys: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Toolkit holds the transport shared by every call.
type Toolkit struct {
	cfg  Config
	base http.RoundTripper
	// limited is base with the provider's answers capped.
	limited http.RoundTripper
	tokens  *pagetoken.Sealer
}

// New returns the toolkit.
func New(cfg Config) (*Toolkit, error) {
	if cfg.Egress == nil {
		cfg.Egress = egress.Strict()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Toolkit{cfg: cfg}
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		t.base = cfg.HTTPClient.Transport
	} else {
		t.base = cfg.Egress.Transport(10 * time.Second)
	}
	t.limited = provhttp.LimitBody(t.base, cfg.MaxResponseBytes)
	var err error
	if t.tokens, err = pagetoken.New(tokenPurpose, cfg.PageTokenKeys); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return t, nil
}

// Close releases idle connections.
func (t *Toolkit) Close() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// clientFor builds the Graph client of a call from its microsoft
// connection.
func (t *Toolkit) clientFor(call toolrunner.Call) (*graphapi.Client, error) {
	conn, ok := call.Connections[Provider]
	if !ok || conn.AccessToken == "" {
		return nil, toolrunner.Errorf(toolrunner.KindAuthorization, true, "the user has no Microsoft connection")
	}
	cfg := graphapi.DefaultConfig()
	if conn.APIBaseURL != "" {
		cfg.BaseURL = conn.APIBaseURL
	}
	cfg.Token = conn.AccessToken
	cfg.MaxResponse = t.cfg.MaxResponseBytes
	cfg.HTTPClient = &http.Client{Timeout: t.cfg.Timeout, Transport: t.limited,
		// Graph's answers are never redirects the client should follow
		// with the user's token.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cfg.Retry, cfg.MaxRetryAfter = t.cfg.Retry, t.cfg.MaxRetryAfter
	c, err := graphapi.New(cfg)
	if err != nil {
		return nil, toolrunner.Errorf("CONFIGURATION_ERROR", false, "the Microsoft auth provider's api_base_url %q is not an http(s) URL", conn.APIBaseURL)
	}
	return c, nil
}
