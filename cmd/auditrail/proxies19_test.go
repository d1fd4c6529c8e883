//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/golang-jwt/jwt/v5"
)

// Behind a trusted proxy that appends its own X-Forwarded-For line, the
// audit event records the proxy's line (the full IPv6 address), not the
// client's forged first line; the JWKS file is read again every
// --jwks-reload, so a key removed from it stops verifying without a
// restart (issue 19 points 7 and 11).
func TestForwardedLinesAndJWKSReload(t *testing.T) {
	t.Parallel()
	k1, k2 := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeKeys := func(keys map[string][]byte) {
		var set []string
		for kid, k := range keys {
			set = append(set, fmt.Sprintf(`{"kty":"oct","kid":%q,"alg":"HS256","k":%q}`, kid, b64url(k)))
		}
		if err := os.WriteFile(path+".tmp", []byte(`{"keys":[`+strings.Join(set, ",")+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(map[string][]byte{"k1": k1, "k2": k2})
	p, boot := devWithKey(t, "--jwks", path, "--jwks-reload", "100ms", "--trusted-proxies", "127.0.0.1")
	c := newAPIClient(t, p.http)

	// Two X-Forwarded-For lines: the client's forged one, then the proxy's.
	body := strings.NewReader(`{"name":"behind a proxy"}`)
	req, _ := http.NewRequest("POST", "http://"+p.http+"/api/v1/orgs", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+boot)
	req.Header.Add("X-Forwarded-For", "6.6.6.6")
	req.Header.Add("X-Forwarded-For", "2001:db8:1:2::42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create org: %d %v", resp.StatusCode, err)
	}
	entries := auditEntries(t, c, boot, "/api/v1/orgs/"+created.Data.ID+"/audit_logs", 1)
	if ip := entries[0]["client_ip"]; ip != "2001:db8:1:2::42" {
		t.Fatalf("client_ip %v, want the proxy's line 2001:db8:1:2::42", ip)
	}

	token := func(kid string, key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "user-" + kid, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The users of the tokens are members of nothing: 403 is a verified
	// token, 401 a refused one.
	status := func(tok string) int { return c.call("GET", "/api/v1/orgs/"+created.Data.ID, tok, nil).status }
	if s1, s2 := status(token("k1", k1)), status(token("k2", k2)); s1 != 403 || s2 != 403 {
		t.Fatalf("both keys in the file: %d %d", s1, s2)
	}
	writeKeys(map[string][]byte{"k2": k2})
	testenv.Eventually(t, 10*time.Second, "k1, removed from the JWKS file, refused", func() bool { return status(token("k1", k1)) == 401 })
	if s := status(token("k2", k2)); s != 403 {
		t.Fatalf("k2 after the reload: %d", s)
	}
}
