// Package provhttp holds what every client of a tenant-chosen provider
// endpoint (Google and Graph APIs, OAuth token, revoke and userinfo
// endpoints) shares: whatever such an endpoint answers is hostile input, so
// its bodies are capped and its redirects never lead to another host.
package provhttp

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrBodyTooLarge: a provider's answer was longer than the cap; the read
// fails with it (wrapped) once the cap is passed.
var ErrBodyTooLarge = errors.New("provider answer too large")

// ErrRedirect: a provider answered with a redirect that a client does not
// follow (another scheme or host, or too many hops).
var ErrRedirect = errors.New("provider redirect refused")

// DefaultMaxBody caps an answer (64 MiB): far above any JSON answer of the
// APIs used, far below what could hurt the process.
const DefaultMaxBody = 64 << 20

// maxHops bounds same-host redirects.
const maxHops = 5

// LimitBody wraps base so that every response body yields at most max bytes;
// reading past them fails with ErrBodyTooLarge. A declared Content-Length
// above max fails the round trip at once.
func LimitBody(base http.RoundTripper, max int64) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if max <= 0 {
		max = DefaultMaxBody
	}
	return &limitTransport{base: base, max: max}
}

type limitTransport struct {
	base http.RoundTripper
	max  int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s %s declares %d bytes (at most %d)", ErrBodyTooLarge, req.Method, req.URL.Redacted(), resp.ContentLength, t.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// CloseIdleConnections passes through to the base transport.
func (t *limitTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	max  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, b.max)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// CheckRedirect is an http.Client CheckRedirect that follows a redirect only
// to the same scheme and host as the first request, at most a few hops, so a
// bearer token, a refresh token or a client secret never reaches another
// host (http.Client forwards headers to the same host, and a transport such
// as oauth2.Transport adds Authorization to every hop).
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("%w: %s answered a redirect to another host (%s://%s)", ErrRedirect, first.Host, req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= maxHops {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirect, maxHops)
	}
	return nil
}

// Client is an http.Client for a provider: base with capped bodies, the
// redirect rule above, and the timeout.
func Client(base http.RoundTripper, timeout time.Duration, maxBody int64) *http.Client {
	return &http.Client{Transport: LimitBody(base, maxBody), Timeout: timeout, CheckRedirect: CheckRedirect}
}
