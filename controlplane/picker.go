package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/oauthflow"
)

// The file picker: a tool whose user's token cannot see a file (Google's
// drive.file scope shows an app only the files it created or the user
// picked for it) answers a picker URL. The user opens it in a browser; the
// platform serves a page that runs the provider's own picker with the
// user's access token, and the files the user chooses become visible to
// the app, so that the tool succeeds on retry.
//
// The URL is the credential, like the OAuth callback's state: a sealed
// state (its own sealer key, so that no OAuth state, connection or secret
// passes for one) bound to the organization, project, user and provider,
// valid PickerTTL and once (its nonce is created in the states bucket).

// pickerPath is the route of the picker page, under the public URL.
const pickerPath = "/api/v1/picker/"

// pickerStateKey is the sealer key (additional data) of picker states.
const pickerStateKey = "picker-state"

// maxPickerState bounds the state accepted in the path.
const maxPickerState = 2048

var (
	// errPickerState: the picker state does not open (forged, tampered).
	errPickerState = errors.New("invalid picker state")
	// errPickerExpired: the picker state opened but its time is over.
	errPickerExpired = errors.New("picker state expired")
)

// pickerState is what a picker URL carries, sealed.
type pickerState struct {
	Nonce     string    `json:"n"`
	Org       uuid.UUID `json:"o"`
	Project   uuid.UUID `json:"p"`
	User      string    `json:"u"`
	Provider  string    `json:"pr"`
	ExpiresAt time.Time `json:"e"`
}

// publicURL is the platform's external base URL, from the OAuth flow's
// redirect URI (ConfigureOAuth); empty without a flow.
func (s *Service) publicURL() string {
	if s.flow == nil {
		return ""
	}
	return strings.TrimSuffix(s.flow.RedirectURL(), oauthflow.CallbackPath)
}

// PickerURL returns a single-use URL of the file picker for the user's
// connection to provider, and when it expires (PickerTTL). The error wraps
// oauthflow.ErrNoProvider when the organization has no such provider,
// oauthflow.ErrNotConnected when the user has no usable connection to it
// (the tool asks to authorize first), ErrOAuthNotConfigured without a
// public URL.
func (s *Service) PickerURL(ctx context.Context, org, project, user, provider string) (string, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return "", time.Time{}, err
	}
	if s.flow == nil {
		return "", time.Time{}, ErrOAuthNotConfigured
	}
	orgID, err1 := uuid.Parse(org)
	projectID, err2 := uuid.Parse(project)
	if err1 != nil || err2 != nil {
		return "", time.Time{}, fmt.Errorf("%w: organization or project is not a UUID", cpstate.ErrInvalid)
	}
	if user == "" {
		return "", time.Time{}, cpstate.Invalid("user_id", "required")
	}
	if _, err := s.Provider(orgID, provider); err != nil {
		return "", time.Time{}, err
	}
	u, _, t, err := s.openConn(cpstate.ConnKey(org, project, user, provider))
	if err != nil {
		return "", time.Time{}, err
	}
	if !usable(u, t, s.now()) {
		return "", time.Time{}, fmt.Errorf("%w: the %s connection is broken or expired: authorize again", ErrNotConnected, provider)
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	st := pickerState{Nonce: base64.RawURLEncoding.EncodeToString(nonce), Org: orgID, Project: projectID, User: user,
		Provider: provider, ExpiresAt: s.now().Add(cpstate.PickerTTL).UTC().Truncate(time.Second)}
	b, err := json.Marshal(st)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("picker state: %w", err)
	}
	sealed, err := s.sealer.Seal(pickerStateKey, b)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("picker state: %w", err)
	}
	return s.publicURL() + pickerPath + base64.RawURLEncoding.EncodeToString(sealed), st.ExpiresAt, nil
}

// openPickerState opens a state from the path: errPickerState unless this
// platform sealed it as a picker state, errPickerExpired when it expired
// at now.
func (s *Service) openPickerState(state string, now time.Time) (pickerState, error) {
	if state == "" || len(state) > maxPickerState {
		return pickerState{}, errPickerState
	}
	sealed, err := base64.RawURLEncoding.DecodeString(state)
	if err != nil {
		return pickerState{}, errPickerState
	}
	b, err := s.sealer.Open(pickerStateKey, sealed)
	if err != nil {
		return pickerState{}, errPickerState
	}
	var st pickerState
	if err := json.Unmarshal(b, &st); err != nil || st.Nonce == "" || st.User == "" || st.Provider == "" || st.ExpiresAt.IsZero() {
		return pickerState{}, errPickerState
	}
	if !now.Before(st.ExpiresAt) {
		return pickerState{}, errPickerExpired
	}
	return st, nil
}

// googlePickerScript is the real Google Picker loader.
const googlePickerScript = "https://apis.google.com/js/api.js"

// pickerScript is the URL of the picker script for a provider, and that
// URL's origin (for the page's CSP): Google's, unless the provider's
// api_base_url is an origin the operator trusts to serve pages' scripts
// (an emulator: TrustPickerScripts) — an organization's admin chooses
// api_base_url, and a script of theirs would run on the platform's origin.
func pickerScript(p oauthflow.Provider, trusted func(origin string) bool) (script, origin string, err error) {
	script = googlePickerScript
	if p.APIBaseURL != "" {
		u, err := url.Parse(p.APIBaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return "", "", fmt.Errorf("%w: the provider's api_base_url is not an absolute http(s) URL", cpstate.ErrInvalid)
		}
		if trusted(u.Scheme + "://" + u.Host) {
			script = strings.TrimSuffix(p.APIBaseURL, "/") + "/js/api.js"
		}
	}
	u, _ := url.Parse(script)
	return script, u.Scheme + "://" + u.Host, nil
}

// TrustPickerScripts lets the file picker page load its script from these
// origins when a provider's api_base_url is there (the demo's emulator);
// every other provider gets Google's script.
func (s *Service) TrustPickerScripts(origins ...string) {
	s.pickerMu.Lock()
	defer s.pickerMu.Unlock()
	if s.pickerOrigins == nil {
		s.pickerOrigins = map[string]bool{}
	}
	for _, o := range origins {
		s.pickerOrigins[strings.TrimSuffix(o, "/")] = true
	}
}

func (s *Service) pickerScriptTrusted(origin string) bool {
	s.pickerMu.Lock()
	defer s.pickerMu.Unlock()
	return s.pickerOrigins[origin]
}

// projectNumber is the leading number of a Google OAuth client id
// (<project number>-<suffix>.apps.googleusercontent.com).
var projectNumber = regexp.MustCompile(`^([0-9]{3,20})-`)

// pickerAppID is the picker's app id: the client id's project number, or
// the client id when it has none.
func pickerAppID(clientID string) string {
	if m := projectNumber.FindStringSubmatch(clientID); m != nil {
		return m[1]
	}
	return clientID
}
