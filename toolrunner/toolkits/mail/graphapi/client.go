// Package graphapi is a thin typed client of the Microsoft Graph v1.0 mail
// endpoints the MailToolkit uses (/me, /me/mailboxSettings,
// /me/mailFolders, /me/messages and their actions). Every request carries
// Prefer: IdType="ImmutableId" so that a message keeps its id when it
// moves (a sent draft keeps the id the caller knows); 429 and 503 are
// retried, honouring Retry-After, within a bounded policy; Graph's error
// JSON becomes an *Error with its code. Links Graph returns
// (@odata.nextLink) are followed only when they point under the client's
// API base (see Relative).
package graphapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/retry"
)

// Sentinel errors.
var (
	// ErrInvalidConfig is wrapped by Config.Validate's errors.
	ErrInvalidConfig = errors.New("graphapi: invalid config")
	// ErrForeignLink: a link is not under the API base (another scheme,
	// host or path): it is never requested with the user's token.
	ErrForeignLink = errors.New("graphapi: link outside the API base")
	// ErrInvalidQuery wraps the errors of the query builders (an
	// unknown property, operator or a value of the wrong type).
	ErrInvalidQuery = errors.New("graphapi: invalid query")
	// ErrInvalidAnswer: an answer holds numbers no Graph answer has (a
	// negative size or count, a count beyond MaxCount).
	ErrInvalidAnswer = errors.New("graphapi: invalid answer")
)

// DefaultBaseURL is Graph v1.0.
const DefaultBaseURL = "https://graph.microsoft.com/v1.0"

// Config of a client.
type Config struct {
	// BaseURL is the API base (default DefaultBaseURL); requests go to
	// BaseURL + "/me/...".
	BaseURL string
	// Token is the user's access token (Bearer).
	Token string
	// HTTPClient carries the requests (its transport does the egress
	// checks); nil: http.DefaultClient.
	HTTPClient *http.Client
	// Retry bounds the attempts of a throttled (429) or unavailable (503)
	// request; MaxAttempts must be set.
	Retry retry.Policy
	// MaxRetryAfter: a Retry-After longer than this is not waited for,
	// the error is returned at once.
	MaxRetryAfter time.Duration
	// MaxResponse bounds an answer read into memory; a longer one fails
	// with provhttp.ErrBodyTooLarge. 0: provhttp.DefaultMaxBody.
	MaxResponse int64
}

// DefaultConfig: Graph, 4 attempts from 500 ms, Retry-After up to 10 s.
func DefaultConfig() Config {
	return Config{BaseURL: DefaultBaseURL,
		Retry:         retry.Policy{Initial: 500 * time.Millisecond, Max: 5 * time.Second, MaxAttempts: 4, MaxElapsed: 30 * time.Second},
		MaxRetryAfter: 10 * time.Second}
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%w: BaseURL %q is not an http(s) URL without credentials or query", ErrInvalidConfig, c.BaseURL)
	case c.Token == "":
		return fmt.Errorf("%w: Token is empty", ErrInvalidConfig)
	case c.Retry.MaxAttempts < 1:
		return fmt.Errorf("%w: Retry.MaxAttempts must be at least 1", ErrInvalidConfig)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("%w: MaxRetryAfter is negative", ErrInvalidConfig)
	case c.MaxResponse < 0:
		return fmt.Errorf("%w: MaxResponse is negative", ErrInvalidConfig)
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Client calls Graph for one user.
type Client struct {
	cfg  Config
	base *url.URL
	hc   *http.Client
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxResponse == 0 {
		cfg.MaxResponse = provhttp.DefaultMaxBody
	}
	base, _ := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{cfg: cfg, base: base, hc: hc}, nil
}

// Base is the API base URL, without a trailing slash.
func (c *Client) Base() string { return c.base.String() }

// Error is an error answer of Graph.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is Graph's error.code (ErrorItemNotFound, InefficientFilter,
	// …); empty when the answer was not Graph's error JSON.
	Code      string
	Message   string
	RequestID string
	// RetryAfter is the answer's Retry-After (0 when absent).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("graph: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("graph: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// errorBody is Graph's error JSON.
type errorBody struct {
	Error struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		InnerError struct {
			RequestID string `json:"request-id"`
		} `json:"innerError"`
	} `json:"error"`
}

func parseError(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.RequestID = eb.Error.Code, eb.Error.Message, eb.Error.InnerError.RequestID
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("request-id")
	}
	return e
}

// retryAfter parses Retry-After: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(100*365*24*3600))) * time.Second // no overflow
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// Prefer values.
const (
	preferImmutable = `IdType="ImmutableId"`
	// PreferText and PreferHTML choose the body format of a message GET.
	PreferText = `outlook.body-content-type="text"`
	PreferHTML = `outlook.body-content-type="html"`
)

// request is one call: rel is a path and query under the base
// ("/me/messages?$top=10").
type request struct {
	method string
	rel    string
	body   any
	prefer []string
}

// idempotent requests may be retried after a 503 or a network error;
// POSTs (create, send) only after a 429, which Graph answers before doing
// anything.
func (r request) idempotent() bool {
	return r.method == http.MethodGet || r.method == http.MethodPatch || r.method == http.MethodDelete
}

// do sends the request, retrying as the policy allows, and decodes a 2xx
// JSON answer into out (when not nil). It answers the status.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return 0, fmt.Errorf("graph: encode %s %s: %w", r.method, r.rel, err)
		}
	}
	target, err := c.resolve(r.rel)
	if err != nil {
		return 0, err
	}
	b := c.cfg.Retry.Backoff()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		status, body, resp, err := c.once(ctx, r, target, payload)
		var wait time.Duration
		switch {
		case err != nil:
			// An answer too large is no accident of the network: asking
			// again reads it again.
			if !r.idempotent() || ctx.Err() != nil || errors.Is(err, provhttp.ErrBodyTooLarge) {
				return 0, err
			}
		case status >= 200 && status < 300:
			if out != nil && len(body) > 0 && status != http.StatusNoContent {
				if err := json.Unmarshal(body, out); err != nil {
					return status, fmt.Errorf("graph: decode %s %s: %w", r.method, r.rel, err)
				}
				if c, ok := out.(checker); ok {
					if err := c.check(); err != nil {
						return status, fmt.Errorf("graph: %s %s: %w", r.method, r.rel, err)
					}
				}
			}
			return status, nil
		default:
			ge := parseError(resp, body)
			if status != http.StatusTooManyRequests && (status != http.StatusServiceUnavailable || !r.idempotent()) {
				return status, ge
			}
			err, wait = ge, ge.RetryAfter
			if wait > c.cfg.MaxRetryAfter {
				return status, ge
			}
		}
		if wait == 0 {
			wait = b.NextBackOff()
		}
		if attempt >= c.cfg.Retry.MaxAttempts || wait < 0 ||
			(c.cfg.Retry.MaxElapsed > 0 && time.Since(start)+wait > c.cfg.Retry.MaxElapsed) {
			return status, err
		}
		if !retry.Sleep(ctx, wait) {
			return status, fmt.Errorf("graph: %s %s: %w", r.method, r.rel, ctx.Err())
		}
	}
}

func (c *Client) once(ctx context.Context, r request, target string, payload []byte) (int, []byte, *http.Response, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("graph: %s %s: %w", r.method, r.rel, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Prefer", strings.Join(append([]string{preferImmutable}, r.prefer...), ", "))
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("graph: %s %s: %w", r.method, r.rel, err)
	}
	defer resp.Body.Close()
	max := c.cfg.MaxResponse
	if resp.ContentLength > max {
		return 0, nil, nil, fmt.Errorf("graph: %s %s: %w: %d bytes declared (at most %d)", r.method, r.rel, provhttp.ErrBodyTooLarge, resp.ContentLength, max)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("graph: %s %s: read: %w", r.method, r.rel, err)
	}
	if int64(len(body)) > max {
		return 0, nil, nil, fmt.Errorf("graph: %s %s: %w: more than %d bytes", r.method, r.rel, provhttp.ErrBodyTooLarge, max)
	}
	return resp.StatusCode, body, resp, nil
}

// Resolve answers the absolute URL of a relative path and query under the
// base; rel must be a clean path of the mailbox API ("/me/…" or
// "/users/…"), else ErrForeignLink.
func (c *Client) Resolve(rel string) (string, error) { return c.resolve(rel) }

func (c *Client) resolve(rel string) (string, error) {
	p, q, _ := strings.Cut(rel, "?")
	if !strings.HasPrefix(p, "/me") && !strings.HasPrefix(p, "/users/") || strings.ContainsAny(p, "\\#@") ||
		strings.Contains(q, "#") || path.Clean(p) != p {
		return "", fmt.Errorf("%w: %q", ErrForeignLink, rel)
	}
	if p != "/me" && !strings.HasPrefix(p, "/me/") && !strings.HasPrefix(p, "/users/") {
		return "", fmt.Errorf("%w: %q", ErrForeignLink, rel)
	}
	abs := c.base.String() + rel
	u, err := url.Parse(abs)
	if err != nil || u.Scheme != c.base.Scheme || u.Host != c.base.Host || u.User != nil {
		return "", fmt.Errorf("%w: %q", ErrForeignLink, rel)
	}
	return abs, nil
}

// Relative answers the path and query of an absolute link Graph returned
// (an @odata.nextLink) relative to the API base, after checking that its
// scheme, host and path prefix are the base's; any other link is
// ErrForeignLink. What it answers is what a pagination token keeps: the
// host always comes from the client's base.
func (c *Client) Relative(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != c.base.Scheme || !strings.EqualFold(u.Host, c.base.Host) || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: %s", ErrForeignLink, redactLink(link))
	}
	prefix := c.base.EscapedPath()
	p := u.EscapedPath()
	if !strings.HasPrefix(p, prefix+"/") {
		return "", fmt.Errorf("%w: %s", ErrForeignLink, redactLink(link))
	}
	rel := strings.TrimPrefix(p, prefix)
	if u.RawQuery != "" {
		rel += "?" + u.RawQuery
	}
	if _, err := c.resolve(rel); err != nil {
		return "", fmt.Errorf("%w: %s", ErrForeignLink, redactLink(link))
	}
	return rel, nil
}

// redactLink keeps a link's scheme and host for error messages.
func redactLink(link string) string {
	if u, err := url.Parse(link); err == nil {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return "(unparsable link)"
}
