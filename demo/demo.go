// Package demo sets up the demo tenant of `auditrail dev --demo`: an
// organization, a project, a user who owns both and is connected to the
// google and microsoft providers, the project's DB_CONNECTION_STRING and an
// API key, all through the admin API as the platform itself. The demo's
// servers (the provider emulators and a MongoDB-wire server with sample
// data) run in the auditrail-demo binary, outside the product (Servers).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/linkbrowser"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/oauthflow"
)

// File is the demo tenant's file in DATA.
const File = "demo.json"

// IDs are the demo tenant, kept in DATA across restarts.
type IDs struct {
	Org     string `json:"organization_id"`
	Project string `json:"project_id"`
	User    string `json:"user_id"`
	// MongoURI is where the embedded server listened (and what the
	// project's DB_CONNECTION_STRING holds); a restart listens there again.
	MongoURI string `json:"mongo_uri,omitempty"`
	// KeyID and Key are the demo user's API key. A demo is not a
	// production tenant: its key is kept here (the file is 0600) and
	// printed at every start, so that a new shell can follow the README.
	KeyID string `json:"key_id,omitempty"`
	Key   string `json:"key,omitempty"`
	// Emulators is where the provider emulators listened; Clients are the
	// OAuth clients registered there for the google and microsoft providers.
	Emulators string            `json:"emulators,omitempty"`
	Clients   map[string]Client `json:"clients,omitempty"`
}

// providers are the auth providers of the demo org, by id (= type).
var providers = []string{oauthflow.TypeGoogle, oauthflow.TypeMicrosoft}

// Config is what Start needs from dev.
type Config struct {
	// App serves the platform's APIs; Start calls them in process, as the
	// platform itself (source SYSTEM), before it listens.
	App    *fiber.App
	Access *cpstate.Access
	// DataDir keeps the demo tenant (File) and the servers' data.
	DataDir string
	// NewKey mints and prints a new demo key, replacing the kept one.
	NewKey bool
	Env    Env
	// ServersBinary is the auditrail-demo binary (ServersBinary()).
	ServersBinary string
	Out           io.Writer
	Log           *slog.Logger
}

// Start starts the demo's servers and sets up the demo tenant through the
// admin API (as the platform itself: source SYSTEM): an organization, a
// project, a user who owns both, the project's DB_CONNECTION_STRING and an
// API key, printed once. A restart reuses all of it (the servers listen
// where they did, so the secret stays as it is): no new key, no new audit
// events; NewKey mints and prints a fresh key. It ends with the shell lines
// (export ORG=… PROJECT=… KEY=…) that the README's examples use. The
// caller ends the servers: Close as it begins to stop, Stop once its own
// connections to them are closed.
func Start(ctx context.Context, cfg Config) (*Servers, error) {
	app, access, env, out, log := cfg.App, cfg.Access, cfg.Env, cfg.Out, cfg.Log
	ids := IDs{User: User}
	path := filepath.Join(cfg.DataDir, File)
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &ids)
	}
	if ids.Clients == nil {
		ids.Clients = map[string]Client{}
	}
	for _, p := range providers {
		if _, ok := ids.Clients[p]; !ok {
			ids.Clients[p] = Client{ID: "auditrail-demo-" + p, Secret: cli.RandomToken(24)}
		}
	}
	mongoAddr := ""
	if u, err := url.Parse(ids.MongoURI); err == nil {
		mongoAddr = u.Host
	}
	srv, err := StartServers(ctx, cfg.ServersBinary, ServersConfig{
		Data: cfg.DataDir, Mongo: mongoAddr, Emulators: ids.Emulators,
		Redirect: env.API + oauthflow.CallbackPath, Clients: ids.Clients,
	}, log)
	if err != nil {
		return nil, err
	}
	cred := access.SystemCredential()
	var call caller = func(method, path string, body any) (map[string]any, int, error) {
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
	fail := func(err error) (*Servers, error) { srv.Stop(); return nil, err }

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
		return cli.WriteFileAtomic(path, b, 0o600)
	}
	// The secret changes only when the server could not listen where it did.
	if srv.MongoURI != ids.MongoURI {
		if _, _, err := call("PUT", "/api/v1/orgs/"+ids.Org+"/projects/"+ids.Project+"/secrets/DB_CONNECTION_STRING", map[string]any{"value": srv.MongoURI}); err != nil {
			return fail(err)
		}
		ids.MongoURI = srv.MongoURI
		if err := save(); err != nil {
			return fail(err)
		}
	}
	k := ids.Key
	if cfg.NewKey || k == "" || !keyValid(call, ids) {
		key, _, err := call("POST", "/api/v1/orgs/"+ids.Org+"/api_keys", map[string]any{"name": "demo " + time.Now().UTC().Format(time.RFC3339), "user_id": ids.User})
		if err != nil {
			return fail(err)
		}
		old := ids.KeyID
		k, _ = key["key"].(string)
		ids.KeyID, _ = key["id"].(string)
		ids.Key = k
		if k == "" || ids.KeyID == "" {
			return fail(errors.New("demo set-up: no API key returned"))
		}
		if err := save(); err != nil {
			return fail(err)
		}
		// --new-key replaces the key: the old one stops working.
		if old != "" {
			if _, status, err := call("DELETE", "/api/v1/orgs/"+ids.Org+"/api_keys/"+old, nil); err != nil {
				return fail(err)
			} else if status != 200 && status != 404 {
				return fail(fmt.Errorf("demo set-up: deleting the old demo key: %d", status))
			}
		}
	}
	if err := connectProviders(ctx, app, call, &ids, srv, env, save); err != nil {
		return fail(err)
	}
	fmt.Fprintf(out, "demo: organization %s, project %s, user %s\n", ids.Org, ids.Project, ids.User)
	fmt.Fprintf(out, "demo: API key of %s (kept in %s; --new-key replaces it): %s\n", ids.User, path, k)
	fmt.Fprintf(out, "demo: MongoDB-wire server with the sample database \"shop\" at %s\n", srv.MongoURI)
	fmt.Fprintf(out, "demo: provider emulators at %s (OAuth for google and microsoft; Google Docs and Drive with %d sample documents; an Outlook mailbox on Microsoft Graph; %s is connected to both)\n",
		srv.Emulators, srv.Samples, ids.User)
	fmt.Fprint(out, Exports(ids, k, env))
	log.Info("demo ready", "organization_id", ids.Org, "project_id", ids.Project)
	return srv, nil
}

// Env is what the printed shell lines need beside the demo tenant.
type Env struct {
	// API is the base URL of the HTTP APIs; NATS the embedded server's
	// client URL ("" when dev runs against an outside NATS).
	API, NATS string
	// BootKey is the bootstrap key when this start generated it, else "".
	BootKey string
	// AdminCreds is the NATS credentials file of the admin role (with NATS).
	AdminCreds string
	// Scopes the registered tools need, by auth provider id: the demo
	// user grants them all.
	Scopes map[string][]string
	// TrustPickerScripts lets the file picker load its script from the
	// emulators (the admin service's TrustPickerScripts; nil: none).
	TrustPickerScripts func(origins ...string)
}

// Exports are the shell lines the README's examples use verbatim:
// export lines for what is known now, and a comment for a key printed at an
// earlier start (only its hash is kept).
func Exports(ids IDs, key string, env Env) string {
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

// caller is an admin API call as the platform itself: the answer's data
// and status; an error for a status over 299 other than 404.
type caller func(method, path string, body any) (map[string]any, int, error)

// keyValid reports whether the kept demo key still exists and is enabled.
func keyValid(call caller, ids IDs) bool {
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

// connectProviders points the demo org's google and microsoft providers at
// the emulators and connects the demo user to both through the real OAuth
// flow (the emulator approves at once). What exists is kept: a restart
// records nothing.
func connectProviders(ctx context.Context, app *fiber.App, call caller, ids *IDs, srv *Servers, env Env, save func() error) error {
	ids.Emulators = strings.TrimPrefix(srv.Emulators, "http://")
	if env.TrustPickerScripts != nil {
		env.TrustPickerScripts(srv.Emulators)
	}
	if err := save(); err != nil {
		return err
	}
	orgBase := "/api/v1/orgs/" + ids.Org
	userBase := orgBase + "/projects/" + ids.Project + "/users/" + ids.User + "/connections"
	for _, id := range providers {
		want := provider(srv.Emulators, id, ids.Clients[id])
		got, status, err := call("GET", orgBase+"/auth_providers/"+id, nil)
		switch {
		case err != nil:
		case status == 404:
			_, _, err = call("POST", orgBase+"/auth_providers", want)
		case got["token_url"] != want["token_url"]: // the emulators moved
			delete(want, "id")
			_, _, err = call("PATCH", orgBase+"/auth_providers/"+id, want)
		}
		if err != nil {
			return err
		}
	}
	conns, _, err := call("GET", userBase, nil)
	if err != nil {
		return err
	}
	connected := map[string]bool{}
	items, _ := conns["items"].([]any)
	for _, it := range items {
		c, ok := it.(map[string]any)
		if !ok || c["connected"] != true {
			continue
		}
		var granted []string
		if s, ok := c["scopes"].([]any); ok {
			for _, v := range s {
				granted = append(granted, fmt.Sprint(v))
			}
		}
		p := fmt.Sprint(c["provider"])
		connected[p] = oauthflow.HasScopes(granted, env.Scopes[p])
	}
	for _, id := range providers {
		if connected[id] {
			continue
		}
		if err := connect(ctx, app, call, userBase+"/"+id+"/authorize", env.Scopes[id], env.API); err != nil {
			return fmt.Errorf("demo: connecting %s to %s: %w", ids.User, id, err)
		}
	}
	return nil
}

// provider is the AuthProvider body that points provider id (its type too)
// at the emulators at base.
func provider(base, id string, c Client) map[string]any {
	return map[string]any{
		"id": id, "type": id, "client_id": c.ID, "client_secret": c.Secret,
		"authorize_url": base + "/oauth/authorize", "token_url": base + "/oauth/token",
		"revoke_url": base + "/oauth/revoke", "userinfo_url": base + "/oauth/userinfo",
		"api_base_url": base + "/" + id, "scopes_default": oauthflow.Defaults[id].ScopesDefault,
	}
}

// connect runs the authorization-code flow for the demo user, asking
// for scopes (merged with the provider's defaults) as a browser does: the
// authorize route's link (the platform's start page; asked as the platform
// itself, it needs no sign-in), Continue, the emulator's redirect, and the
// callback. The platform answers in process (it does not listen yet).
func connect(ctx context.Context, app *fiber.App, call caller, authorizePath string, scopes []string, publicURL string) error {
	body := map[string]any{}
	if len(scopes) > 0 {
		body["scopes"] = scopes
	}
	a, _, err := call("POST", authorizePath, body)
	if err != nil {
		return err
	}
	start, _ := a["url"].(string)
	if start == "" {
		return errors.New("no authorization URL")
	}
	pub, err := url.Parse(publicURL)
	if err != nil {
		return err
	}
	b := linkbrowser.New(inProcess{app: app, host: pub.Host, next: http.DefaultTransport})
	defer b.HTTP.CloseIdleConnections()
	done, err := b.Connect(ctx, start, "")
	if err != nil {
		return err
	}
	if done.Status != http.StatusOK {
		return fmt.Errorf("the callback answered %d", done.Status)
	}
	return nil
}

// inProcess sends the requests for the platform's own host to app, the
// others on to next.
type inProcess struct {
	app  *fiber.App
	host string
	next http.RoundTripper
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host {
		return t.next.RoundTrip(req)
	}
	resp, err := t.app.Test(req, 30_000)
	if err != nil {
		return nil, err
	}
	resp.Request = req
	return resp, nil
}
