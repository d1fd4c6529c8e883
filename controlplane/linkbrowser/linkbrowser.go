// Package linkbrowser opens the platform's connection links (the OAuth
// start page, /api/v1/oauth/start/{ticket}) the way a browser does: one
// cookie jar, forms posted with their hidden fields and the page's Origin,
// redirects seen one at a time. The demo set-up connects its user with it,
// and the tests drive the honest flow and the attacks on it.
package linkbrowser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ErrUnexpected: a page was not what the flow expects at that step.
var ErrUnexpected = errors.New("unexpected page")

// Browser is one browser: its cookies are its own.
type Browser struct {
	// HTTP has the jar and follows no redirect (Page.Location tells).
	HTTP *http.Client
}

// New returns a browser whose requests go through rt (nil: the default
// transport).
func New(rt http.RoundTripper) *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{HTTP: &http.Client{Transport: rt, Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Page is an answer as the browser shows it, with the start page's forms.
type Page struct {
	Status   int
	Body     string
	Header   http.Header
	Location string // of a redirect
	// Of the start page: the hidden double-submit token, the action of
	// its "Continue" form and of its sign-in form ("" when absent).
	CSRF, Continue, SignIn string
}

var (
	csrfField  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	formAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
)

func (b *Browser) do(req *http.Request) (Page, error) {
	resp, err := b.HTTP.Do(req)
	if err != nil {
		return Page{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Page{}, err
	}
	p := Page{Status: resp.StatusCode, Body: string(body), Header: resp.Header, Location: resp.Header.Get("Location")}
	if m := csrfField.FindStringSubmatch(p.Body); m != nil {
		p.CSRF = unescape(m[1])
	}
	for _, m := range formAction.FindAllStringSubmatch(p.Body, -1) {
		a := unescape(m[1])
		if strings.HasSuffix(a, "/sign_in") {
			p.SignIn = a
		} else {
			p.Continue = a
		}
	}
	return p, nil
}

// unescape undoes html/template's escaping of an attribute value.
func unescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#39;", "'", "&#34;", `"`, "&lt;", "<", "&gt;", ">").Replace(s)
}

// Get opens u.
func (b *Browser) Get(ctx context.Context, u string) (Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Page{}, err
	}
	return b.do(req)
}

// Post sends a form to u with the given Origin header ("" for none), as a
// page of that origin does.
func (b *Browser) Post(ctx context.Context, u, origin string, form url.Values) (Page, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return Page{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

// OriginOf is the origin a page at u sends its forms with.
func OriginOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// SignIn opens the start page and signs in with credential (an API key or
// JWT); it answers the start page shown after.
func (b *Browser) SignIn(ctx context.Context, startURL, credential string) (Page, error) {
	p, err := b.Get(ctx, startURL)
	if err != nil {
		return p, err
	}
	if p.Status != http.StatusOK || p.SignIn == "" {
		return p, fmt.Errorf("%w: the start page (%d) has no sign-in form", ErrUnexpected, p.Status)
	}
	p, err = b.Post(ctx, p.SignIn, OriginOf(startURL), url.Values{"csrf": {p.CSRF}, "credential": {credential}})
	if err != nil || p.Status != http.StatusSeeOther {
		return p, errors.Join(err, fmt.Errorf("%w: sign-in answered %d", ErrUnexpected, p.Status))
	}
	return b.Get(ctx, p.Location)
}

// Continue opens the start page, signing in with credential when it asks
// (credential "" signs nothing in), clicks "Continue" and answers the
// provider's authorization URL it is sent to.
func (b *Browser) Continue(ctx context.Context, startURL, credential string) (string, error) {
	p, err := b.Get(ctx, startURL)
	if err != nil {
		return "", err
	}
	if p.SignIn != "" && credential != "" {
		if p, err = b.SignIn(ctx, startURL, credential); err != nil {
			return "", err
		}
	}
	if p.Status != http.StatusOK || p.Continue == "" {
		return "", fmt.Errorf("%w: the start page (%d) offers no Continue", ErrUnexpected, p.Status)
	}
	p, err = b.Post(ctx, p.Continue, OriginOf(startURL), url.Values{"csrf": {p.CSRF}})
	if err != nil {
		return "", err
	}
	if p.Status != http.StatusSeeOther || p.Location == "" {
		return "", fmt.Errorf("%w: Continue answered %d", ErrUnexpected, p.Status)
	}
	return p.Location, nil
}

// Connect runs the whole flow against a provider that approves at once
// (the emulator with AutoApprove, or a user already consenting): Continue,
// the provider's redirects until one leads back to the platform (the
// callback), and the callback; it answers the callback's page.
func (b *Browser) Connect(ctx context.Context, startURL, credential string) (Page, error) {
	next, err := b.Continue(ctx, startURL, credential)
	if err != nil {
		return Page{}, err
	}
	platform := OriginOf(startURL)
	for range 10 {
		p, err := b.Get(ctx, next)
		if err != nil {
			return p, err
		}
		if p.Status != http.StatusFound && p.Status != http.StatusSeeOther {
			return p, fmt.Errorf("%w: the provider answered %d, not a redirect", ErrUnexpected, p.Status)
		}
		u, err := url.Parse(next)
		if err != nil {
			return p, err
		}
		loc, err := u.Parse(p.Location)
		if err != nil {
			return p, err
		}
		if OriginOf(loc.String()) == platform {
			return b.Get(ctx, loc.String())
		}
		next = loc.String()
	}
	return Page{}, fmt.Errorf("%w: the provider redirected more than 10 times", ErrUnexpected)
}
