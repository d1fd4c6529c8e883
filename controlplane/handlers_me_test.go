package controlplane

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// GET /api/v1/me for each kind of principal: the platform admin sees every
// organization and project with role ""; a user (API key) the orgs of
// their key with their role and their projects with their project role,
// owners and admins every project (their org role where they are no
// project member); a service key its org and project. The answers match
// admin.yaml.
func TestMe(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newCPEnv(t, srv.ClientURL(), nil)
	org := "/api/v1/orgs/" + e.org
	e.must(201, "POST", org+"/projects", bootKey, map[string]any{"name": "q"})
	beta := e.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "beta"}).field("id")
	e.must(201, "PUT", org+"/members/dave", bootKey, map[string]any{"role": "member", "display_name": "Dave"})
	dave := e.must(201, "POST", org+"/api_keys", bootKey, map[string]any{"name": "d", "user_id": "dave"}).field("key")
	e.must(201, "PUT", org+"/members/erin", bootKey, map[string]any{"role": "owner"})
	erin := e.must(201, "POST", org+"/api_keys", bootKey, map[string]any{"name": "e", "user_id": "erin"}).field("key")
	// bob owns beta too; his acme key sees acme only, his beta key beta only.
	e.must(201, "PUT", "/api/v1/orgs/"+beta+"/members/bob", bootKey, map[string]any{"role": "owner"})
	bobBeta := e.must(201, "POST", "/api/v1/orgs/"+beta+"/api_keys", bootKey, map[string]any{"name": "bb", "user_id": "bob"}).field("key")
	svc := e.must(201, "POST", org+"/projects/"+e.project+"/service_keys", e.alice, map[string]any{"name": "app"}).field("key")

	// A real listener, so that the answers are checked against admin.yaml.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = e.app.Listener(ln) }()
	t.Cleanup(func() { _ = e.app.Shutdown(); <-done })
	api := newAdminSpec(t, "http://"+ln.Addr().String())

	me := func(key string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		raw := api.do(t, req, 200)
		var body struct {
			Data Me `json:"data"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		d := body.Data
		user := "null"
		if d.Principal.UserID != nil {
			user = *d.Principal.UserID
		}
		var orgs []string
		for _, o := range d.Organizations {
			var ps []string
			for _, p := range o.Projects {
				ps = append(ps, p.Name+"/"+string(p.Role))
			}
			orgs = append(orgs, fmt.Sprintf("%s/%s[%s]", o.Name, o.Role, strings.Join(ps, ",")))
		}
		return d.Principal.Type + " " + d.Principal.DisplayName + " " + user, strings.Join(orgs, " ")
	}
	for _, tc := range []struct {
		name, key, who, orgs string
	}{
		{"platform admin", bootKey, "PLATFORM_ADMIN platform admin null", "acme/[p/,q/] beta/[]"},
		{"org admin, member of p", e.alice, "API_KEY a alice", "acme/admin[p/member,q/admin]"},
		{"org member of p", e.bob, "API_KEY b bob", "acme/member[p/member]"},
		{"org member of no project", dave, "API_KEY d dave", "acme/member[]"},
		{"org owner of no project", erin, "API_KEY e erin", "acme/owner[p/owner,q/owner]"},
		{"owner through another org's key", bobBeta, "API_KEY bb bob", "beta/owner[]"},
		{"service key", svc, "SERVICE_KEY app null", "acme/[p/]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, orgs := me(tc.key)
			if who != tc.who || orgs != tc.orgs {
				t.Errorf("got %q %q\nwant %q %q", who, orgs, tc.who, tc.orgs)
			}
		})
	}
	if r := e.call("GET", "/api/v1/me", "", nil); r.status != 401 {
		t.Fatalf("anonymous: %d", r.status)
	}
	if !api.checked["getMe"] {
		t.Fatal("getMe not checked")
	}
}
