package controlplane

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The picker routes (no bearer: the sealed state in the path says who):
//
//	GET  /api/v1/picker/{state}         the page: what will happen (the
//	                                    provider, the platform user) and a
//	                                    "Choose files" button. It consumes
//	                                    nothing and holds no token, so that
//	                                    a link scanner or a preview bot that
//	                                    fetches the URL gets nothing and
//	                                    leaves the link to the user. It sets
//	                                    the page's anti-CSRF cookie.
//	POST /api/v1/picker/{state}/claim   the click: claims the state (once,
//	                                    within PickerTTL) and answers the
//	                                    user's access token and the picker's
//	                                    configuration, no-store.
//	POST /api/v1/picker/{state}/picked  the page reports the files the user
//	                                    picked (once, by the browser that
//	                                    claimed, until PickerReportTTL after
//	                                    the state's expiry): recorded as
//	                                    USER_CONNECTION UPDATED by the user,
//	                                    with the files in the event.
//	GET  /api/v1/picker/static/{file}   the page's module and style sheet.
//
// Both POSTs are the page's own: their Origin is the platform's public
// origin, and they echo, in the X-Auditrail-Picker-CSRF header, the random
// value that the page's GET set in a SameSite=Strict HttpOnly cookie
// scoped to the state's path. The claim keeps a hash of that value, and
// the report must come with the same one.
//
// The report's own marker (marker.picked.<nonce>) is committed in one
// atomic batch with its audit event: a report whose commit fails leaves
// neither, and the page retries it.

// maxPickedFiles bounds a report.
const maxPickedFiles = 100

const (
	// pickerCookie holds the page's anti-CSRF value.
	pickerCookie = "auditrail_picker"
	// pickerCSRFHeader echoes it in the page's POSTs.
	pickerCSRFHeader = "X-Auditrail-Picker-CSRF"
	// pickerStaticPath serves the page's assets (under the public URL).
	pickerStaticPath = pickerPath + "static/"
)

//go:embed assets/picker.html assets/picker.js assets/picker.css
var pickerAssets embed.FS

var pickerTemplate = template.Must(template.ParseFS(pickerAssets, "assets/picker.html"))

// pickerAsset is a static file of the page.
type pickerAsset struct {
	body        []byte
	contentType string
	version     string // a hash of the body, in the URL: the file is cached for a day
}

var pickerStatic = func() map[string]pickerAsset {
	out := map[string]pickerAsset{}
	for name, ct := range map[string]string{"picker.js": "text/javascript; charset=utf-8", "picker.css": "text/css; charset=utf-8"} {
		b, err := pickerAssets.ReadFile("assets/" + name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out[name] = pickerAsset{body: b, contentType: ct, version: hex.EncodeToString(sum[:6])}
	}
	return out
}()

// pickerPageData is what picker.html renders, every value as text.
type pickerPageData struct {
	Fail *pickerFailure
	// JS and CSS are the assets' paths; Script the provider's picker
	// script; Nonce allows both scripts (CSP).
	JS, CSS, Script, Nonce string
	Provider, User         string
	// Claim and Report are the URLs of the POSTs, CSRF their anti-CSRF value.
	Claim, Report, CSRF string
}

type pickerFailure struct{ Title, Message string }

// pickerConfig is what the claim answers to the page's script.
type pickerConfig struct {
	Token string `json:"token"`
	AppID string `json:"app_id"`
	// DeveloperKey is the provider's picker_api_key (Google requires one).
	DeveloperKey string `json:"developer_key,omitempty"`
}

// publicBase splits the public URL into its origin and its path.
func (s *Service) publicBase() (origin, path string) { return splitOrigin(s.publicURL()) }

// splitOrigin splits an absolute URL into its origin as a browser sends it
// (lower case, without the scheme's default port) and its path; an origin
// of "" matches no request.
func splitOrigin(raw string) (origin, path string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", ""
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80") && !(scheme == "https" && p == "443") {
		host += ":" + p
	}
	return scheme + "://" + host, strings.TrimSuffix(u.EscapedPath(), "/")
}

// assetURL is the versioned path of a static file of the page.
func (s *Service) assetURL(name string) string {
	_, path := s.publicBase()
	return path + pickerStaticPath + name + "?v=" + pickerStatic[name].version
}

// setPageHeaders makes a page that no cache keeps, no referrer leaks and
// nobody frames.
func setPageHeaders(c *fiber.Ctx, csp string) {
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, csp)
}

// pickerFail answers a page without scripts that says what went wrong.
func (s *Service) pickerFail(c *fiber.Ctx, status int, title, msg string) error {
	var b bytes.Buffer
	if err := pickerTemplate.Execute(&b, pickerPageData{Fail: &pickerFailure{Title: title, Message: msg}, CSS: s.assetURL("picker.css")}); err != nil {
		return fmt.Errorf("picker page: %w", err)
	}
	setPageHeaders(c, "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	return c.Status(status).Send(b.Bytes())
}

// randomToken returns n random bytes, base64url (nothing that html/template
// or a cookie would escape).
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// pickerPage answers the page of a state. It consumes nothing and holds no
// token: it shows what will happen, and the click claims (pickerClaim).
func (s *Service) pickerPage(c *fiber.Ctx) error {
	if s.flow == nil {
		return s.pickerFail(c, fiber.StatusServiceUnavailable, "Picker not available", "This platform runs without a public URL.")
	}
	ctx := c.UserContext()
	state := c.Params("state")
	st, err := s.openPickerState(state, s.now())
	switch {
	case errors.Is(err, errPickerExpired):
		return s.pickerFail(c, fiber.StatusBadRequest, "Link expired", "This file picker link is older than its time limit.")
	case err != nil:
		s.log.Warn("picker: invalid state", "client_ip", c.IP())
		return s.pickerFail(c, fiber.StatusBadRequest, "Invalid link", "This file picker link was not issued by this platform, or was altered.")
	}
	switch _, err := s.state.StateClaim(ctx, "picker."+st.Nonce); {
	case err == nil:
		return s.pickerFail(c, fiber.StatusBadRequest, "Link already used", "This file picker link has been used already; each works once.")
	case !errors.Is(err, cpstate.ErrNotFound):
		s.log.Error("picker: cannot read the state's claim", "err", err)
		return s.pickerFail(c, fiber.StatusServiceUnavailable, "Try again", "The platform cannot open the file picker right now.")
	}
	p, err := s.Provider(st.Org, st.Provider)
	if err != nil {
		return s.pickerFail(c, fiber.StatusBadRequest, "Provider not configured", fmt.Sprintf("The organization no longer has the auth provider %s.", st.Provider))
	}
	script, origin, err := pickerScript(p, s.pickerScriptTrusted)
	if err != nil {
		return s.pickerFail(c, fiber.StatusBadRequest, "Provider misconfigured", fmt.Sprintf("The auth provider %s has no usable API base URL.", st.Provider))
	}
	// The page asks the provider nothing (the claim renews the token).
	if u, _, t, err := s.openConn(cpstate.ConnKey(st.Org.String(), st.Project.String(), st.User, st.Provider)); err != nil || !usable(u, t, s.now()) {
		return s.pickerFail(c, fiber.StatusBadRequest, "Not connected", fmt.Sprintf("Your %s connection is missing or no longer valid: authorize again first.", st.Provider))
	}
	nonce, csrf := randomToken(18), randomToken(32)
	base := s.publicURL() + pickerPath + state
	var b bytes.Buffer
	err = pickerTemplate.Execute(&b, pickerPageData{JS: s.assetURL("picker.js"), CSS: s.assetURL("picker.css"), Script: script,
		Nonce: nonce, Provider: st.Provider, User: st.User, Claim: base + "/claim", Report: base + "/picked", CSRF: csrf})
	if err != nil {
		return fmt.Errorf("picker page: %w", err)
	}
	pubOrigin, pubPath := s.publicBase()
	c.Cookie(&fiber.Cookie{Name: pickerCookie, Value: csrf, Path: pubPath + pickerPath + state, MaxAge: int(cpstate.PickerMarkerTTL / time.Second),
		Secure: strings.HasPrefix(pubOrigin, "https:"), HTTPOnly: true, SameSite: fiber.CookieSameSiteStrictMode})
	setPageHeaders(c, pickerCSP(nonce, origin))
	return c.Status(fiber.StatusOK).Send(b.Bytes())
}

// pickerCSP allows the page's two nonced scripts (its module and the
// picker script, and what the picker script loads: strict-dynamic), calls
// to the picker's origin (its file list) and to the platform (claim,
// report), the provider's picker frame, the page's style sheet, and
// nothing else: no inline script, style or eval.
func pickerCSP(nonce, origin string) string {
	frames, static := origin, origin
	if origin == "https://apis.google.com" {
		// Google's picker runs in a docs.google.com frame; its loader's
		// styles and images come from gstatic.
		frames += " https://docs.google.com"
		static += " https://www.gstatic.com https://ssl.gstatic.com"
	}
	return "default-src 'none'; script-src 'nonce-" + nonce + "' 'strict-dynamic' 'self' " + origin +
		"; connect-src 'self' " + origin + "; frame-src " + frames + "; img-src " + static + " data:" +
		"; style-src 'self' " + static + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// pickerStaticFile answers a static file of the page.
func (s *Service) pickerStaticFile(c *fiber.Ctx) error {
	a, ok := pickerStatic[c.Params("file")]
	if !ok {
		return fiber.NewError(fiber.StatusNotFound, "no such file")
	}
	c.Set(fiber.HeaderContentType, a.contentType)
	c.Set(fiber.HeaderCacheControl, "public, max-age=86400")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("Cross-Origin-Resource-Policy", "same-origin")
	return c.Status(fiber.StatusOK).Send(a.body)
}

// pickerCaller checks that a POST comes from the page of the state: its
// Origin is the platform's, it is not a cross-site request, and it echoes
// the page's anti-CSRF cookie. It answers the hash of the cookie's value
// (what the claim keeps).
func (s *Service) pickerCaller(c *fiber.Ctx) ([]byte, error) {
	origin, _ := s.publicBase()
	if got := c.Get(fiber.HeaderOrigin); got == "" || got != origin {
		s.log.Warn("picker: request from another origin refused", "origin", got, "client_ip", c.IP())
		return nil, fiber.NewError(fiber.StatusForbidden, "This request did not come from the file picker page.")
	}
	if site := c.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return nil, fiber.NewError(fiber.StatusForbidden, "This request did not come from the file picker page.")
	}
	cookie, echoed := c.Cookies(pickerCookie), c.Get(pickerCSRFHeader)
	if cookie == "" || subtle.ConstantTimeCompare([]byte(cookie), []byte(echoed)) != 1 {
		return nil, fiber.NewError(fiber.StatusForbidden, "This page is out of date or was opened in another browser: reload it.")
	}
	sum := sha256.Sum256([]byte(cookie))
	return []byte(hex.EncodeToString(sum[:])), nil
}

// pickerClaim is the click on "Choose files": it claims the state, once,
// and answers the user's fresh access token and the picker configuration.
func (s *Service) pickerClaim(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	if s.flow == nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, ErrOAuthNotConfigured.Error())
	}
	caller, err := s.pickerCaller(c)
	if err != nil {
		return err
	}
	st, err := s.openPickerState(c.Params("state"), s.now())
	switch {
	case errors.Is(err, errPickerExpired):
		return fiber.NewError(fiber.StatusBadRequest, "This file picker link is older than its time limit. Ask your assistant for a new link.")
	case err != nil:
		return fiber.NewError(fiber.StatusBadRequest, "This file picker link was not issued by this platform, or was altered.")
	}
	p, err := s.Provider(st.Org, st.Provider)
	if err != nil {
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("The organization no longer has the auth provider %s.", st.Provider))
	}
	ctx := c.UserContext()
	// The token first: a provider that does not answer leaves the link
	// unclaimed, for another click.
	conn, err := s.Connection(ctx, st.Org.String(), st.Project.String(), st.User, st.Provider)
	switch {
	case errors.Is(err, oauthflow.ErrNotConnected):
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("Your %s connection is missing or no longer valid: authorize again first.", st.Provider))
	case err != nil:
		s.log.Warn("picker: no access token", "provider", st.Provider, "user", st.User, "err", err)
		return fiber.NewError(fiber.StatusBadGateway, fmt.Sprintf("%s did not renew your access. Try again in a moment.", st.Provider))
	}
	fresh, err := s.state.ClaimStateAs(ctx, "picker."+st.Nonce, caller)
	if err != nil {
		s.log.Error("picker: cannot claim the state", "err", err)
		return fiber.NewError(fiber.StatusServiceUnavailable, "The platform cannot open the file picker right now. Try again in a moment.")
	}
	if !fresh {
		s.log.Warn("picker: replayed state refused", "provider", st.Provider, "user", st.User, "org", st.Org)
		return fiber.NewError(fiber.StatusConflict, "This file picker link has been used already; each works once. Ask your assistant for a new link.")
	}
	s.log.Info("picker opened", "provider", st.Provider, "user", st.User, "org", st.Org, "project", st.Project)
	return httpapi.Reply(c, fiber.StatusOK, pickerConfig{Token: conn.AccessToken, AppID: pickerAppID(p.ClientID), DeveloperKey: p.PickerAPIKey})
}

// pickedFile is one file of a report.
type pickedFile struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
}

// fileIDPattern is a Drive file id (or an emulator's).
var fileIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// pickerPicked records what the user picked: once per claimed state, from
// the browser that claimed it, within the report window. The report's
// marker and its event are one atomic commit, so that a failed commit
// leaves the report to a retry.
func (s *Service) pickerPicked(c *fiber.Ctx) error {
	if s.flow == nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, ErrOAuthNotConfigured.Error())
	}
	caller, err := s.pickerCaller(c)
	if err != nil {
		return err
	}
	// The user may choose for a while after the link expired.
	st, err := s.openPickerState(c.Params("state"), s.now().Add(-cpstate.PickerReportTTL))
	switch {
	case errors.Is(err, errPickerExpired):
		return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("picker state: the time to report picked files (%s after the link expired) is over", cpstate.PickerReportTTL))
	case err != nil:
		return fiber.NewError(fiber.StatusBadRequest, "picker state: invalid")
	}
	var body struct {
		Files []pickedFile `json:"files"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if len(body.Files) == 0 || len(body.Files) > maxPickedFiles {
		return httpError(cpstate.Invalid("files", "1 to %d files", maxPickedFiles))
	}
	for i, f := range body.Files {
		if !fileIDPattern.MatchString(f.ID) || len(f.Name) > 1024 || len(f.MimeType) > 256 || strings.ContainsAny(f.Name+f.MimeType, "\x00\r\n") {
			return httpError(cpstate.Invalid(fmt.Sprintf("files[%d]", i), "an id of 1 to 256 URL-safe characters, a name of at most 1024 and a MIME type of at most 256 characters"))
		}
	}
	ctx := c.UserContext()
	claimed, err := s.state.StateClaim(ctx, "picker."+st.Nonce)
	switch {
	case errors.Is(err, cpstate.ErrNotFound):
		return fiber.NewError(fiber.StatusBadRequest, "picker state: the picker was never opened")
	case err != nil:
		return httpError(err)
	case subtle.ConstantTimeCompare(claimed, caller) != 1:
		return fiber.NewError(fiber.StatusForbidden, "picker state: the picker was opened in another browser")
	}
	key := cpstate.ConnKey(st.Org.String(), st.Project.String(), st.User, st.Provider)
	var u cpstate.UserConnection
	if _, err := s.state.Get(key, &u); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "picker state: the connection no longer exists")
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	cl := &call{c: c, source: schemas.AuditSourceAPI, ip: s.proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)).String(),
		p: auth.Principal{ID: st.User, Type: auth.TypeAccount, UserID: st.User, DisplayName: st.User}}
	before := s.connView(u)
	after := s.connView(u)
	if m, ok := after.(map[string]any); ok {
		m["picker_files"] = body.Files
	}
	project := st.Project
	mut := producers.Mutation{ResourceType: schemas.ResourceTypeUserConnection, ResourceID: st.User + "/" + st.Provider,
		ResourceDisplay: st.Provider + " for " + st.User, OrgID: st.Org, ProjectID: &project,
		Action: schemas.AuditActionUpdated, Before: before, After: after}
	err = s.commitRecorded(cl, mut, cpstate.SetMarker(pickedMarker(st.Nonce), cpstate.PickerMarkerTTL))
	if errors.Is(err, cpstate.ErrConflict) {
		return fiber.NewError(fiber.StatusConflict, "picker state: already reported")
	}
	if err != nil {
		s.log.Warn("picker: report not recorded; the page may retry it", "provider", st.Provider, "user", st.User, "err", err)
		return httpError(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// pickedMarker is the key (under markerPrefix) of a state's report.
func pickedMarker(nonce string) string { return "picked." + nonce }
