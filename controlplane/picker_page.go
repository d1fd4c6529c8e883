package controlplane

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The picker routes (no bearer: the sealed state in the path says who):
//
//	GET  /api/v1/picker/{state}         the page; consumes the state.
//	POST /api/v1/picker/{state}/picked  the page reports the files the user
//	                                    picked (once, only after the page
//	                                    was opened, until PickerReportTTL
//	                                    after the state's expiry): recorded
//	                                    as USER_CONNECTION UPDATED by the
//	                                    user, with the files in the event.

// PickerReportTTL is how long after its state's expiry the page may still
// report what the user picked (the picker stays open while they choose).
const PickerReportTTL = time.Hour

// maxPickedFiles bounds a report.
const maxPickedFiles = 100

var pickerTemplate = template.Must(template.New("picker").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Choose files · auditrail</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.ok{color:#1a7f37}.err{color:#b42318}p{line-height:1.5}</style></head>
<body><h1>Choose the files your assistant may use</h1>
<p>Only the files you select become visible to the application; it sees nothing else of your {{.Provider}} account.</p>
<p id="status" role="status">Loading the file picker…</p>
<script type="application/json" id="picker-config">{{.Config}}</script>
<script nonce="{{.Nonce}}" src="{{.Script}}"></script>
<script nonce="{{.Nonce}}">
(function () {
  var cfg = JSON.parse(document.getElementById('picker-config').textContent);
  var status = document.getElementById('status');
  function show(msg, ok) { status.textContent = msg; status.className = ok ? 'ok' : 'err'; }
  function report(docs) {
    var files = docs.map(function (d) {
      return {id: String(d[google.picker.Document.ID] || ''), name: String(d[google.picker.Document.NAME] || ''),
        mime_type: String(d[google.picker.Document.MIME_TYPE] || '')};
    });
    fetch(cfg.report, {method: 'POST', credentials: 'omit', referrerPolicy: 'no-referrer',
      headers: {'Content-Type': 'application/json'}, body: JSON.stringify({files: files})}).catch(function () {});
  }
  function picked(data) {
    var action = data[google.picker.Response.ACTION];
    if (action === google.picker.Action.PICKED) {
      var docs = data[google.picker.Response.DOCUMENTS] || [];
      report(docs);
      show('Access granted to ' + docs.length + ' file(s). Return to your assistant and retry.', true);
    } else if (action === google.picker.Action.CANCEL) {
      show('No file was chosen. Ask your assistant for a new link to try again.', false);
    }
  }
  function open() {
    var b = new google.picker.PickerBuilder()
      .addView(google.picker.ViewId.DOCUMENTS)
      .enableFeature(google.picker.Feature.MULTISELECT_ENABLED)
      .setOAuthToken(cfg.token)
      .setAppId(cfg.app_id)
      .setCallback(picked);
    if (cfg.developer_key) { b = b.setDeveloperKey(cfg.developer_key); }
    b.build().setVisible(true);
  }
  if (typeof gapi === 'undefined') { show('The file picker could not be loaded. Ask your assistant for a new link.', false); return; }
  gapi.load('picker', {callback: open});
})();
</script>
</body></html>
`))

// pickerConfig is what the page's script reads (JSON, escaped for a
// script element by html/template).
type pickerConfig struct {
	Token string `json:"token"`
	AppID string `json:"app_id"`
	// DeveloperKey is the provider's picker_api_key (Google requires one).
	DeveloperKey string `json:"developer_key,omitempty"`
	Report       string `json:"report"`
}

func (s *Service) pickerFail(c *fiber.Ctx, status int, title, msg string) error {
	return writePage(c, status, page{Title: title, Message: msg, Hint: "Ask your assistant for a new link."})
}

// pickerPage answers the picker page of a state, once.
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
	fresh, err := s.state.claimState(ctx, "picker."+st.Nonce)
	if err != nil {
		s.log.Error("picker: cannot mark the state used", "err", err)
		return s.pickerFail(c, fiber.StatusServiceUnavailable, "Try again", "The platform cannot open the file picker right now.")
	}
	if !fresh {
		s.log.Warn("picker: replayed state refused", "provider", st.Provider, "user", st.User, "org", st.Org)
		return s.pickerFail(c, fiber.StatusBadRequest, "Link already used", "This file picker link has been used already; each works once.")
	}
	p, err := s.Provider(st.Org, st.Provider)
	if err != nil {
		return s.pickerFail(c, fiber.StatusBadRequest, "Provider not configured", fmt.Sprintf("The organization no longer has the auth provider %s.", st.Provider))
	}
	script, origin, err := pickerScript(p)
	if err != nil {
		return s.pickerFail(c, fiber.StatusBadRequest, "Provider misconfigured", fmt.Sprintf("The auth provider %s has no usable API base URL.", st.Provider))
	}
	conn, err := s.Connection(ctx, st.Org.String(), st.Project.String(), st.User, st.Provider)
	switch {
	case errors.Is(err, oauthflow.ErrNotConnected):
		return s.pickerFail(c, fiber.StatusBadRequest, "Not connected", fmt.Sprintf("Your %s connection is missing or no longer valid: authorize again first.", st.Provider))
	case err != nil:
		s.log.Warn("picker: no access token", "provider", st.Provider, "user", st.User, "err", err)
		return s.pickerFail(c, fiber.StatusBadGateway, "Provider unavailable", fmt.Sprintf("%s did not renew your access.", st.Provider))
	}
	nb := make([]byte, 18)
	_, _ = rand.Read(nb)
	// base64url: nothing html/template would escape in the attribute.
	nonce := base64.RawURLEncoding.EncodeToString(nb)
	var b bytes.Buffer
	err = pickerTemplate.Execute(&b, map[string]any{"Provider": st.Provider, "Nonce": nonce, "Script": script,
		"Config": pickerConfig{Token: conn.AccessToken, AppID: pickerAppID(p.ClientID), DeveloperKey: p.PickerAPIKey,
			Report: s.publicURL() + pickerPath + state + "/picked"}})
	if err != nil {
		return err
	}
	s.log.Info("picker opened", "provider", st.Provider, "user", st.User, "org", st.Org, "project", st.Project)
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, pickerCSP(nonce, origin, s.publicURL()))
	return c.Status(fiber.StatusOK).Send(b.Bytes())
}

// pickerCSP allows the page's two nonced scripts (and what the picker
// script loads, strict-dynamic), calls to the picker's origin (its file
// list) and to the platform (the report), the provider's picker frame, and
// nothing else.
func pickerCSP(nonce, origin, self string) string {
	frames, static := origin, origin
	if origin == "https://apis.google.com" {
		// Google's picker runs in a docs.google.com frame; its loader's
		// styles and images come from gstatic.
		frames += " https://docs.google.com"
		static += " https://www.gstatic.com https://ssl.gstatic.com"
	}
	return "default-src 'none'; script-src 'nonce-" + nonce + "' 'strict-dynamic' " + origin +
		"; connect-src " + origin + " " + self + "; frame-src " + frames + "; img-src " + static + " data:" +
		"; style-src 'unsafe-inline' " + static + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// pickedFile is one file of a report.
type pickedFile struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	MimeType string `json:"mime_type"`
}

// fileIDPattern is a Drive file id (or an emulator's).
var fileIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// pickerPicked records what the user picked, once per opened page.
func (s *Service) pickerPicked(c *fiber.Ctx) error {
	if s.flow == nil {
		return fiber.NewError(fiber.StatusServiceUnavailable, ErrOAuthNotConfigured.Error())
	}
	sealed := c.Params("state")
	// The user may choose for a while after opening the page.
	st, err := s.openPickerState(sealed, s.now().Add(-PickerReportTTL))
	if err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "picker state: invalid or expired")
	}
	var body struct {
		Files []pickedFile `json:"files"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if len(body.Files) == 0 || len(body.Files) > maxPickedFiles {
		return httpError(invalid("files", "1 to %d files", maxPickedFiles))
	}
	for i, f := range body.Files {
		if !fileIDPattern.MatchString(f.ID) || len(f.Name) > 1024 || len(f.MimeType) > 256 || strings.ContainsAny(f.Name+f.MimeType, "\x00\r\n") {
			return httpError(invalid(fmt.Sprintf("files[%d]", i), "an id of 1 to 256 URL-safe characters, a name of at most 1024 and a MIME type of at most 256 characters"))
		}
	}
	ctx := c.UserContext()
	// The page must have been opened (its state claimed); claiming it here
	// otherwise burns the link.
	if opened, err := s.state.claimState(ctx, "picker."+st.Nonce); err != nil {
		return httpError(err)
	} else if opened {
		return fiber.NewError(fiber.StatusBadRequest, "picker state: the page was never opened")
	}
	fresh, err := s.state.claimState(ctx, "picked."+st.Nonce)
	if err != nil {
		return httpError(err)
	}
	if !fresh {
		return fiber.NewError(fiber.StatusConflict, "picker state: already reported")
	}
	key := connKey(st.Org.String(), st.Project.String(), st.User, st.Provider)
	var u UserConnection
	if _, err := s.state.get(key, &u); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "picker state: the connection no longer exists")
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	cl := &call{c: c, source: schemas.AuditSourceAPI, ip: s.proxies.ClientIP(peer, c.Get(fiber.HeaderXForwardedFor)).String(),
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
	if err := s.commitRecorded(cl, mut); err != nil {
		return httpError(err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}
