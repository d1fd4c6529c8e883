// Package apiclient is the HTTP client of the commands that call the
// platform's API with the user's key (admin, verify, mcp, healthcheck):
// it follows no redirect, so the key goes to the URL the user gave and
// nowhere else; it bounds what it reads; it decodes the API's envelope.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
)

// MaxAnswer bounds an answer read by Call.
const MaxAnswer = 16 << 20

// NoRedirect is an HTTP client that follows no redirect (Go's client would
// keep the Authorization header on a redirect to a subdomain, or from https
// to http of the same host): a redirect comes back as the answer, which
// RefuseRedirect turns into an error. timeout 0: none (each request has
// its own).
func NoRedirect(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// RefuseRedirect turns a redirect answer into an error naming where it
// pointed: give --url the final address.
func RefuseRedirect(resp *http.Response) error {
	if resp.StatusCode < 300 || resp.StatusCode >= 400 || resp.Header.Get("Location") == "" {
		return nil
	}
	return fmt.Errorf("the server answered %d, a redirect to %s: auditrail follows no redirect with your key; give --url the address it redirects to",
		resp.StatusCode, redact.URL(resp.Header.Get("Location")))
}

// CheckBaseURL refuses a --url that is not an absolute http(s) URL (a
// usage error), naming it without any password it holds, and what it
// should look like.
func CheckBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := redact.URL(base)
		if i := strings.LastIndex(shown, "@"); i >= 0 && !strings.Contains(shown, "://") {
			shown = redact.Mask + shown[i:] // user or token@host without a scheme
		}
		hint := "like http://127.0.0.1:8080"
		if !strings.Contains(base, "://") {
			hint = "did you mean http://" + shown + "?"
		}
		return cli.UsageErrorf("--url %q is not an absolute http(s) URL (%s)", shown, hint)
	}
	return nil
}

// IsLoopbackHost reports whether host (a URL's, without port or brackets)
// is localhost or a loopback address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Error is an error answer of the API; RetryAfter is set from a 429's
// Retry-After.
type Error struct {
	Status     int
	Msg        string
	RetryAfter time.Duration
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Msg) }

// ErrorFrom reads the error answer resp (its envelope's msg, else the
// start of its body).
func ErrorFrom(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Msg string `json:"msg"`
	}
	_ = json.Unmarshal(raw, &env)
	if env.Msg == "" {
		env.Msg = fmt.Sprintf("%.200s", raw)
	}
	return withRetryAfter(&Error{Status: resp.StatusCode, Msg: env.Msg}, resp)
}

func withRetryAfter(e *Error, resp *http.Response) *Error {
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

// Client calls the API at Base with Key, marking each request with the
// source Source (X-Auditrail-Source; empty: none).
type Client struct {
	Base, Key, Source string
	HTTP              *http.Client
}

// New is a client of base with key, each call bounded by timeout.
func New(base, key string, timeout time.Duration) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Key: key, Source: "CLI", HTTP: NoRedirect(timeout)}
}

// Open sends a GET whose answer the caller reads as it streams (an
// export) and must close: an error answer is an *Error, a redirect is
// refused. The client's timeout bounds the whole answer: give 0 for a long
// one and bound it with ctx.
func (c *Client) Open(ctx context.Context, path string) (*http.Response, error) {
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, redact.Error(err, c.Base)
	}
	if err := RefuseRedirect(resp); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, ErrorFrom(resp)
	}
	return resp, nil
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, cli.Usage(redact.Error(fmt.Errorf("--url: %w", err), c.Base))
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if c.Source != "" {
		req.Header.Set("X-Auditrail-Source", c.Source)
	}
	return req, nil
}

// Call sends one request (body as JSON when not nil) and returns the
// answer's data, or an error: *Error with the API's message for an error
// answer.
func (c *Client) Call(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, redact.Error(err, c.Base)
	}
	defer resp.Body.Close()
	if err := RefuseRedirect(resp); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return nil, redact.Error(fmt.Errorf("%s %s: %w", method, path, err), c.Base)
	}
	if len(raw) > MaxAnswer {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, MaxAnswer)
	}
	var env struct {
		Code int             `json:"code"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("%s %s: %d, not an auditrail answer: %.200s", method, path, resp.StatusCode, raw)
	}
	if resp.StatusCode >= 300 {
		return nil, withRetryAfter(&Error{Status: resp.StatusCode, Msg: env.Msg}, resp)
	}
	return env.Data, nil
}
