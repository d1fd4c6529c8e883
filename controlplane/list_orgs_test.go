package controlplane

import (
	"encoding/json"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// GET /api/v1/orgs: every organization for the platform admin; for a user
// only those they are a member of, with their role; for a project service
// key, none.
func TestListOrgs(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newCPEnv(t, srv.ClientURL(), nil)
	other := e.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "other"}).field("id")
	svc := e.must(201, "POST", "/api/v1/orgs/"+e.org+"/projects/"+e.project+"/service_keys", e.alice, map[string]any{"name": "app"}).field("key")
	list := func(key string) map[string]string {
		t.Helper()
		r := e.must(200, "GET", "/api/v1/orgs", key, nil)
		var d struct {
			Items []struct{ ID, Name, Role string }
		}
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, it := range d.Items {
			out[it.ID] = it.Name + "/" + it.Role
		}
		return out
	}
	if got := list(bootKey); len(got) != 2 || got[e.org] != "acme/" || got[other] != "other/" {
		t.Fatalf("platform admin: %v", got)
	}
	if got := list(e.alice); len(got) != 1 || got[e.org] != "acme/admin" {
		t.Fatalf("alice: %v", got)
	}
	if got := list(e.bob); len(got) != 1 || got[e.org] != "acme/member" {
		t.Fatalf("bob: %v", got)
	}
	if got := list(svc); len(got) != 0 {
		t.Fatalf("service key: %v", got)
	}
	if r := e.call("GET", "/api/v1/orgs", "", nil); r.status != 401 {
		t.Fatalf("anonymous: %d", r.status)
	}
}
