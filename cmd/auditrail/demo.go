package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/internal/ferret"
)

const demoFile = "demo.json"

// demoIDs are the demo tenant, kept in DATA across restarts.
type demoIDs struct {
	Org     string `json:"organization_id"`
	Project string `json:"project_id"`
	User    string `json:"user_id"`
	// MongoURI is where the embedded server listened (and what the
	// project's DB_CONNECTION_STRING holds); a restart listens there again.
	MongoURI string `json:"mongo_uri,omitempty"`
	// KeyID is the demo user's API key, printed once at its creation.
	KeyID string `json:"key_id,omitempty"`
}

// startDemo starts the embedded MongoDB-wire server with the sample
// database and sets up the demo tenant through the admin API (as the
// platform itself: source SYSTEM): an organization, a project, a user who
// owns both, the project's DB_CONNECTION_STRING and an API key, printed
// once. A restart reuses all of it (the server listens where it did, so the
// secret stays as it is): no new key, no new audit events; newKey mints and
// prints a fresh key. It ends with the shell lines (export ORG=… PROJECT=…
// KEY=…) that the README's examples use.
func startDemo(ctx context.Context, app *fiber.App, access *controlplane.Access, dataDir string, newKey bool, env demoEnv, out io.Writer, log *slog.Logger) (func(), error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ids := demoIDs{User: "demo-user"}
	path := filepath.Join(dataDir, demoFile)
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &ids)
	}
	addr := "127.0.0.1:0"
	if u, err := url.Parse(ids.MongoURI); err == nil && u.Host != "" && checkFree("demo MongoDB-wire server", u.Host) == nil {
		addr = u.Host
	}
	srv, err := ferret.StartOn(filepath.Join(dataDir, "ferretdb"), addr, quiet)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := ferret.Seed(sctx, srv.URI); err != nil {
		srv.Stop()
		return nil, err
	}
	cred := access.SystemCredential()
	call := func(method, path string, body any) (map[string]any, int, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req := httptest.NewRequest(method, path, rd)
		req.Header.Set("Authorization", "Bearer "+cred)
		req.Header.Set("Content-Type", "application/json")
		resp, err := app.Test(req, 30_000)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		var env struct {
			Msg  string         `json:"msg"`
			Data map[string]any `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&env)
		if resp.StatusCode >= 300 && resp.StatusCode != 404 {
			return nil, resp.StatusCode, fmt.Errorf("demo set-up: %s %s: %d %s", method, path, resp.StatusCode, env.Msg)
		}
		return env.Data, resp.StatusCode, nil
	}
	fail := func(err error) (func(), error) { srv.Stop(); return nil, err }

	exists := false
	if ids.Org != "" {
		_, status, err := call("GET", "/api/v1/orgs/"+ids.Org, nil)
		if err != nil {
			return fail(err)
		}
		exists = status == 200
	}
	if !exists {
		org, _, err := call("POST", "/api/v1/orgs", map[string]any{"name": "Demo"})
		if err != nil {
			return fail(err)
		}
		ids.Org = org["id"].(string)
		project, _, err := call("POST", "/api/v1/orgs/"+ids.Org+"/projects", map[string]any{"name": "demo"})
		if err != nil {
			return fail(err)
		}
		ids.Project = project["id"].(string)
		if _, _, err := call("PUT", "/api/v1/orgs/"+ids.Org+"/members/"+ids.User, map[string]any{"role": "owner", "display_name": "Demo User"}); err != nil {
			return fail(err)
		}
		if _, _, err := call("PUT", "/api/v1/orgs/"+ids.Org+"/projects/"+ids.Project+"/members/"+ids.User, map[string]any{"role": "admin"}); err != nil {
			return fail(err)
		}
		ids.MongoURI, ids.KeyID = "", ""
	}
	save := func() error {
		b, _ := json.MarshalIndent(ids, "", "  ")
		return writeFileAtomic(path, b, 0o600)
	}
	// The secret changes only when the server could not listen where it did.
	if srv.URI != ids.MongoURI {
		if _, _, err := call("PUT", "/api/v1/orgs/"+ids.Org+"/projects/"+ids.Project+"/secrets/DB_CONNECTION_STRING", map[string]any{"value": srv.URI}); err != nil {
			return fail(err)
		}
		ids.MongoURI = srv.URI
		if err := save(); err != nil {
			return fail(err)
		}
	}
	k := ""
	if newKey || !demoKeyValid(call, ids) {
		key, _, err := call("POST", "/api/v1/orgs/"+ids.Org+"/api_keys", map[string]any{"name": "demo " + time.Now().UTC().Format(time.RFC3339), "user_id": ids.User})
		if err != nil {
			return fail(err)
		}
		k, _ = key["key"].(string)
		ids.KeyID, _ = key["id"].(string)
		if k == "" || ids.KeyID == "" {
			return fail(errors.New("demo set-up: no API key returned"))
		}
		if err := save(); err != nil {
			return fail(err)
		}
	}
	fmt.Fprintf(out, "demo: organization %s, project %s, user %s\n", ids.Org, ids.Project, ids.User)
	if k != "" {
		fmt.Fprintf(out, "demo: API key of %s (shown once): %s\n", ids.User, k)
	} else {
		fmt.Fprintf(out, "demo: API key of %s: the one printed when it was made (id %s); `auditrail dev --demo --new-key` prints a new one\n", ids.User, ids.KeyID)
	}
	fmt.Fprintf(out, "demo: MongoDB-wire server with the sample database \"shop\" at %s\n", srv.URI)
	fmt.Fprint(out, demoExports(ids, k, env))
	log.Info("demo ready", "organization_id", ids.Org, "project_id", ids.Project)
	return srv.Stop, nil
}

// demoEnv is what the printed shell lines need beside the demo tenant.
type demoEnv struct {
	// API is the base URL of the HTTP APIs; NATS the embedded server's
	// client URL ("" when dev runs against an outside NATS).
	API, NATS string
	// BootKey is the bootstrap key when this start generated it, else "".
	BootKey string
	// AdminCreds is the NATS credentials file of the admin role (with NATS).
	AdminCreds string
}

// demoExports are the shell lines the README's examples use verbatim:
// export lines for what is known now, and a comment for a key printed at an
// earlier start (only its hash is kept).
func demoExports(ids demoIDs, key string, env demoEnv) string {
	var b strings.Builder
	b.WriteString("demo: in the shell where you follow the README, run:\n")
	fmt.Fprintf(&b, "export ORG=%s PROJECT=%s", ids.Org, ids.Project)
	if key != "" {
		fmt.Fprintf(&b, " KEY=%s", key)
	}
	b.WriteString("\n")
	more := []string{"AUDITRAIL_URL=" + env.API}
	if env.BootKey != "" {
		more = append(more, "AUDITRAIL_KEY="+env.BootKey)
	}
	if env.NATS != "" {
		more = append(more, "AUDITRAIL_NATS_URL="+env.NATS, "AUDITRAIL_NATS_CREDS="+env.AdminCreds)
	}
	b.WriteString("export " + strings.Join(more, " ") + "\n")
	if key == "" {
		b.WriteString("# KEY: the demo key printed at the first start (`make run ARGS=--new-key` prints a new one)\n")
	}
	if env.BootKey == "" {
		b.WriteString("# AUDITRAIL_KEY: the bootstrap key printed at the first start\n")
	}
	return b.String()
}

// demoKeyValid reports whether the kept demo key still exists and is enabled.
func demoKeyValid(call func(method, path string, body any) (map[string]any, int, error), ids demoIDs) bool {
	if ids.KeyID == "" {
		return false
	}
	list, status, err := call("GET", "/api/v1/orgs/"+ids.Org+"/api_keys", nil)
	if err != nil || status != 200 {
		return false
	}
	items, _ := list["items"].([]any)
	for _, it := range items {
		if k, ok := it.(map[string]any); ok && k["id"] == ids.KeyID && k["disabled"] == false {
			return true
		}
	}
	return false
}

// clientURL is the http URL a client on this host uses for a listen
// address: an unspecified host (":8080", "0.0.0.0:8080") is reached on the
// loopback address.
func clientURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
