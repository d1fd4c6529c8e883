//go:build e2e

package main

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/toolrunner/platform"
)

// The toolrunner role, connected with its own credentials (which may not
// publish to the control-plane bucket), gets an expiring token refreshed:
// the controlplane role calls the provider once and stores the tokens.
func TestToolRunnerRoleRefreshesThroughControlPlane(t *testing.T) {
	t.Parallel()
	var refreshes atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" && r.ParseForm() == nil && r.PostForm.Get("grant_type") == "refresh_token" && r.PostForm.Get("refresh_token") == "r-1" {
			refreshes.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"ya29.refreshed","token_type":"Bearer","expires_in":3600,"refresh_token":"r-2"}`)
			return
		}
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer idp.Close()

	const boot = "bootstrap-key-of-the-refresh-test"
	dev := startDev(t, t.TempDir(), "--bootstrap-key", boot)
	secrets := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	common := []string{"--bootstrap-key", boot, "--secrets-keys", secrets, "--allow-private-egress"}
	cp := newAPIClient(t, startRole(t, "controlplane", append(dev.natsArgs(natsx.RoleControlPlane), common...)...))
	pageKeys := base64.StdEncoding.EncodeToString([]byte("page-token-key-of-this-test!"))
	tr := newAPIClient(t, startRole(t, "toolrunner", append(dev.natsArgs(natsx.RoleToolRunner), append(common, "--outbox", t.TempDir(), "--page-token-keys", pageKeys)...)...))
	must := func(c *apiClient, status int, method, path string, body any) map[string]any {
		t.Helper()
		r := c.call(method, path, boot, body)
		if r.status != status {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
		}
		return r.data()
	}
	org := must(cp, 201, "POST", "/api/v1/orgs", map[string]any{"name": "Refresh"})["id"].(string)
	orgPath := "/api/v1/orgs/" + org
	projPath := orgPath + "/projects/" + must(cp, 201, "POST", orgPath+"/projects", map[string]any{"name": "p"})["id"].(string)
	must(cp, 201, "POST", orgPath+"/auth_providers", map[string]any{"id": "google", "type": "google", "client_id": "c", "client_secret": "s",
		"authorize_url": idp.URL + "/authorize", "token_url": idp.URL + "/token", "api_base_url": idp.URL})
	guard, err := newEgress(true, false, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	reg, closeToolkits := platform.Toolkits(guard, nil, [][]byte{[]byte("page-token-key-of-this-test!")}, slog.Default())
	scopes := platform.ProviderScopes(reg)["google"]
	closeToolkits()
	must(cp, 201, "PUT", projPath+"/users/bob/connections/google", map[string]any{"access_token": "ya29.old", "refresh_token": "r-1",
		"scopes": scopes, "expires_at": time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)})

	// The tool runner's mirror may lag a moment: run until it refreshes.
	testenv.Eventually(t, 15*time.Second, "a refresh reaches the provider", func() bool {
		must(tr, 200, "POST", projPath+"/tools/execute", map[string]any{"tool_name": "DocsToolkit.WhoAmI", "input": map[string]any{}, "user_id": "bob"})
		return refreshes.Load() > 0
	})
	// Stored by the control plane: its listing shows the new expiry, and
	// the next execution refreshes nothing.
	items := must(cp, 200, "GET", projPath+"/users/bob/connections", nil)["items"].([]any)
	conn := items[0].(map[string]any)
	exp, _ := time.Parse(time.RFC3339, fmt.Sprint(conn["expires_at"]))
	if conn["status"] != "connected" || time.Until(exp) < 50*time.Minute {
		t.Fatalf("connection after the refresh: %v", conn)
	}
	must(tr, 200, "POST", projPath+"/tools/execute", map[string]any{"tool_name": "DocsToolkit.WhoAmI", "input": map[string]any{}, "user_id": "bob"})
	if n := refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
}
