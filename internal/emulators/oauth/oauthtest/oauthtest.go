// Package oauthtest gets access tokens from the OAuth emulator the way a
// real client does — the authorization-code flow with PKCE S256 — for tests
// of the provider emulators and the toolkits.
package oauthtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Client is an OAuth client registered with the emulator.
type Client struct {
	ID, Secret, RedirectURI string
}

// Token runs the flow against the emulator whose /authorize and /token are
// under base, as client c for the user (login_hint: the emulator must
// approve at once), asking for scopes, and answers the access token. It
// fails the test on any other outcome.
func Token(t testing.TB, base string, c Client, user string, scopes ...string) string {
	t.Helper()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {c.RedirectURI},
		"scope": {strings.Join(scopes, " ")}, "state": {rand.Text()}, "login_hint": {user},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(base + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d %v", resp.StatusCode, loc)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {c.RedirectURI}, "code_verifier": {verifier}}
	req, err := http.NewRequest(http.MethodPost, base+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(c.ID, c.Secret)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}
