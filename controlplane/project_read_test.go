package controlplane

import (
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// Project-scoped reads follow the project rule of the audit routes: an
// organization member outside the project sees none of its members,
// secret names, hooks or service keys (403, also for a project that does
// not exist); a project member and the organization's admins do.
func TestProjectReadsNeedTheProject(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newCPEnv(t, srv.ClientURL(), nil)
	// dave: an org member, not of the project.
	e.must(201, "PUT", "/api/v1/orgs/"+e.org+"/members/dave", bootKey, map[string]any{"role": "member"})
	dave := e.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "d", "user_id": "dave"}).field("key")
	// erin: an org admin, not of the project.
	e.must(201, "PUT", "/api/v1/orgs/"+e.org+"/members/erin", bootKey, map[string]any{"role": "admin"})
	erin := e.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "e", "user_id": "erin"}).field("key")

	proj := "/api/v1/orgs/" + e.org + "/projects/" + e.project
	e.must(201, "PUT", proj+"/secrets/API_TOKEN", e.alice, map[string]any{"value": "v"})
	hook := e.must(201, "POST", proj+"/hooks", e.alice, hookBody("https://hooks.example.com")).field("id")
	e.must(201, "POST", proj+"/service_keys", e.alice, map[string]any{"name": "app"})

	routes := []string{proj + "/members", proj + "/secrets", proj + "/hooks", proj + "/hooks/" + hook, proj + "/service_keys"}
	for _, path := range routes {
		t.Run(path[len(proj):], func(t *testing.T) {
			if r := e.call("GET", path, dave, nil); r.status != 403 {
				t.Fatalf("org member outside the project: %d %s (want 403)", r.status, r.Msg)
			}
			e.must(200, "GET", path, e.bob, nil)   // project member
			e.must(200, "GET", path, erin, nil)    // org admin
			e.must(200, "GET", path, bootKey, nil) // platform admin
		})
	}
	// A project that does not exist: 403 for the outsider too (no probing).
	other := "/api/v1/orgs/" + e.org + "/projects/00000000-0000-4000-8000-000000000001/secrets"
	if r := e.call("GET", other, dave, nil); r.status != 403 {
		t.Fatalf("outsider on an unknown project: %d", r.status)
	}
	if r := e.call("GET", other, erin, nil); r.status != 404 {
		t.Fatalf("org admin on an unknown project: %d", r.status)
	}
	// Organization-level reads are unchanged for the member.
	e.must(200, "GET", "/api/v1/orgs/"+e.org+"/projects", dave, nil)
}
