// Package docs is the DocsToolkit (seeds/002, issue 11): create, read, edit,
// comment on and search the documents of the user's Google Drive, through
// the real client libraries (google.golang.org/api docs/v1, drive/v3,
// people/v1) and the user's OAuth connection. Every call goes where the
// organization's auth provider says (its api_base_url; empty: Google) and
// every connection passes the egress guard, since that URL is chosen by a
// tenant.
package docs

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/drive/v3"
	"google.golang.org/api/option"
	"google.golang.org/api/people/v1"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/pagetoken"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/toolrunner"
)

// Name and Version of the toolkit, and the auth provider it needs.
const (
	Name    = "DocsToolkit"
	Version = "6.0.0"
	// Provider is the id and type of the auth provider every tool needs.
	Provider = "google"
	// SecretLLM is the optional secret EditDocument lists (see defs.go).
	SecretLLM = "LLM_API_KEY"
)

// OAuth scopes the tools ask for (least privilege: drive.file gives access
// to the documents this app created or the user picked with the picker).
const (
	ScopeDriveFile = "https://www.googleapis.com/auth/drive.file"
	ScopeOpenID    = "openid"
	ScopeEmail     = "https://www.googleapis.com/auth/userinfo.email"
	ScopeProfile   = "https://www.googleapis.com/auth/userinfo.profile"
)

// PickerLinks issues the URL of a file picker page for a user: the page
// lists the user's files at the provider and grants this app access to the
// ones the user picks (the control plane implements it).
type PickerLinks interface {
	// PickerURL answers a URL the user opens in a browser, valid until
	// expiresAt. Whoever holds it acts for the user on that page: it goes
	// to the caller only.
	PickerURL(ctx context.Context, org, project, user, provider string) (url string, expiresAt time.Time, err error)
}

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
	// Picker issues picker URLs (GenerateGoogleFilePickerUrl); nil: that
	// tool answers that the platform has no picker.
	Picker PickerLinks
	// Log receives what callers are not told (nil: slog.Default()).
	Log *slog.Logger
	// MaxResponseBytes caps every answer of the provider: the API base is
	// chosen by a tenant, and a longer answer fails the call
	// (provhttp.ErrBodyTooLarge), never the process.
	MaxResponseBytes int64
	// PageTokenKeys sign the search tools' pagination tokens
	// (internal/pagetoken): the first signs, every one verifies, each at
	// least 16 bytes. Every instance that may receive a token back must
	// hold the key that signed it.
	PageTokenKeys [][]byte
}

// DefaultConfig: 30 s per API call, strict egress, answers up to
// provhttp.DefaultMaxBody (64 MiB), and a random page token key of this
// process only (tokens do not survive a restart nor reach another
// instance: deployments set PageTokenKeys).
func DefaultConfig() Config {
	return Config{Timeout: 30 * time.Second, Egress: egress.Strict(), MaxResponseBytes: provhttp.DefaultMaxBody,
		PageTokenKeys: [][]byte{randomKey()}}
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
	case c.MaxResponseBytes < 1<<10:
		return fmt.Errorf("%w: MaxResponseBytes must be at least 1 KiB", ErrInvalidConfig)
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

// clients are the API clients of one call, authorized with the user's
// token and pointed at the provider's base URL.
type clients struct {
	http   *http.Client
	docs   *gdocs.Service
	drive  *drive.Service
	people *people.Service
	// docsEndpoint is where Docs calls go (for the raw batchUpdate).
	docsEndpoint string
}

// clientsFor builds the clients of a call from its Google connection.
func (t *Toolkit) clientsFor(ctx context.Context, call toolrunner.Call) (*clients, error) {
	conn, ok := call.Connections[Provider]
	if !ok || conn.AccessToken == "" {
		return nil, toolrunner.Errorf(toolrunner.KindAuthorization, true, "the user has no Google connection")
	}
	// oauth2.Transport sets Authorization on every request, redirects
	// included: provhttp.CheckRedirect follows none to another host, so
	// the token stays with the provider's API base.
	hc := &http.Client{Timeout: t.cfg.Timeout, CheckRedirect: provhttp.CheckRedirect, Transport: &oauth2.Transport{
		Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: conn.AccessToken, TokenType: "Bearer"}), Base: t.limited}}
	c := &clients{http: hc, docsEndpoint: "https://docs.googleapis.com/"}
	docsOpts := []option.ClientOption{option.WithHTTPClient(hc)}
	driveOpts := []option.ClientOption{option.WithHTTPClient(hc)}
	peopleOpts := []option.ClientOption{option.WithHTTPClient(hc)}
	if b := conn.APIBaseURL; b != "" {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, toolrunner.Errorf("CONFIGURATION_ERROR", false, "the Google auth provider's api_base_url %q is not an http(s) URL", b)
		}
		b = strings.TrimRight(b, "/")
		c.docsEndpoint = b + "/"
		docsOpts = append(docsOpts, option.WithEndpoint(b+"/"))
		driveOpts = append(driveOpts, option.WithEndpoint(b+"/drive/v3/"))
		peopleOpts = append(peopleOpts, option.WithEndpoint(b+"/"))
	}
	var err error
	if c.docs, err = gdocs.NewService(ctx, docsOpts...); err != nil {
		return nil, fmt.Errorf("docs client: %w", err)
	}
	if c.drive, err = drive.NewService(ctx, driveOpts...); err != nil {
		return nil, fmt.Errorf("drive client: %w", err)
	}
	if c.people, err = people.NewService(ctx, peopleOpts...); err != nil {
		return nil, fmt.Errorf("people client: %w", err)
	}
	return c, nil
}

// documentURL is where the user opens a document.
func documentURL(id string) string {
	return "https://docs.google.com/document/d/" + url.PathEscape(id) + "/edit"
}
