package controlplane

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
)

// Hooks created and deleted through the admin API in a loop: HookIDs
// answers exactly the existing ones, and a hook client wired to it (as cmd
// wires it) forgets each deleted hook's health, counters and client.
func TestDeletedHooksForgottenByTheHookClient(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	guard := egress.AllowLoopback()
	n.svc.UseEgress(guard)
	proxy := hookproxy.New(hookproxy.Config{Egress: guard, Existing: n.svc.HookIDs, SweepEvery: time.Nanosecond}, nil)
	t.Cleanup(proxy.Close)
	n.svc.UseHookMonitor(proxyMonitor{proxy})
	a := adminAPI{t: t, app: n.app, key: bootKey}
	_, org := a.do("POST", "/api/v1/orgs", map[string]any{"name": "acme"})
	orgID := data(org)["id"].(string)
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"healthy"}`) }))
	defer hookSrv.Close()

	st, body := a.do("POST", "/api/v1/orgs/"+orgID+"/hooks", hookBody(hookSrv.URL))
	if st != 201 {
		t.Fatalf("create: %d %v", st, body)
	}
	kept := data(body)["id"].(string)
	var deleted []string
	for i := 0; i < 40; i++ {
		st, body := a.do("POST", "/api/v1/orgs/"+orgID+"/hooks", hookBody(hookSrv.URL)) // checks /health: the proxy keeps its state
		if st != 201 {
			t.Fatalf("create %d: %d %v", i, st, body)
		}
		id := data(body)["id"].(string)
		if _, ok := proxy.HookStatus(id); !ok {
			t.Fatalf("hook %d: the health check on create left no state", i)
		}
		if st, body := a.do("DELETE", "/api/v1/orgs/"+orgID+"/hooks/"+id, nil); st != 200 && st != 204 {
			t.Fatalf("delete %d: %d %v", i, st, body)
		}
		deleted = append(deleted, id)
	}
	ids, err := n.svc.HookIDs()
	if err != nil || len(ids) != 1 || !ids[kept] {
		t.Fatalf("HookIDs = %v, %v; want only %s", ids, err, kept)
	}
	// The next state the client makes sweeps: every deleted hook is gone.
	proxy.CheckHealth(t.Context(), hookproxy.Hook{ID: "probe", Name: "probe"})
	for _, id := range deleted {
		if _, ok := proxy.HookStatus(id); ok {
			t.Fatalf("deleted hook %s still has state in the hook client", id)
		}
	}
	if _, ok := proxy.HookStatus(kept); !ok {
		t.Fatal("the existing hook's state was forgotten")
	}
}
