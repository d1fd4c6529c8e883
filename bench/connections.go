package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
)

// connectionSamples is the number of interleaved pairs of executions the
// connections benchmark measures (after a warm-up of a tenth of it).
var connectionSamples = 20_000

// connectionGoalMicros is the goal: a tool needing a valid
// connection adds at most this many µs at p50 over one needing none.
const connectionGoalMicros = 50

// ConnectionFigures measures Runner.Execute in process (no hooks, events
// published to an embedded JetStream) for a tool needing a valid google
// connection, stored sealed in a real control plane, against the same tool
// needing none. The figure's goal is the reference plus 50 µs, expressed as
// a ratio to the reference measured in this run.
func ConnectionFigures(ctx context.Context, progress io.Writer) ([]Figure, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	dir, err := os.MkdirTemp("", "auditrail-bench-conn-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bn, err := startNATS(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer bn.close()
	nc, js := bn.nc, bn.js
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	state, err := cpstate.OpenState(ctx, js, cpstate.DefaultStateConfig(), quiet)
	if err != nil {
		return nil, err
	}
	bootKey := uuid.NewString()
	access := cpstate.NewAccess(state, auth.HashKey(bootKey), nil)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := cpstate.NewSealer(key)
	if err != nil {
		return nil, err
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), quiet)
	if err != nil {
		return nil, err
	}
	svc, err := controlplane.NewService(controlplane.DefaultServiceConfig(), state, access, sealer,
		producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, quiet)
	if err != nil {
		return nil, err
	}
	app := httpapi.NewApp(quiet)
	svc.Register(app)
	admin := func(method, path string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req := httptest.NewRequest(method, path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bootKey)
		resp, err := app.Test(req, -1)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var env struct{ Data map[string]any }
		return env.Data, json.Unmarshal(raw, &env)
	}

	// An organization whose user has a google connection valid for a day,
	// through the admin API.
	org, err := admin("POST", "/api/v1/orgs", map[string]any{"name": "bench"})
	if err != nil {
		return nil, err
	}
	orgID := org["id"].(string)
	project, err := admin("POST", "/api/v1/orgs/"+orgID+"/projects", map[string]any{"name": "bench"})
	if err != nil {
		return nil, err
	}
	projectID := project["id"].(string)
	if _, err := admin("POST", "/api/v1/orgs/"+orgID+"/auth_providers", map[string]any{"id": "google", "type": "google",
		"client_id": "bench.apps", "client_secret": "bench-secret"}); err != nil {
		return nil, err
	}
	const token = "bench-access-token"
	if _, err := admin("PUT", "/api/v1/orgs/"+orgID+"/projects/"+projectID+"/users/bench/connections/google", map[string]any{
		"access_token": token, "refresh_token": "bench-refresh-token", "scopes": []string{"drive.readonly"},
		"expires_at": time.Now().Add(24 * time.Hour).UTC()}); err != nil {
		return nil, err
	}
	sc := toolrunner.Scope{Org: uuid.MustParse(orgID), Project: uuid.MustParse(projectID), UserID: "bench"}
	// The connection reaches the state mirror the runner reads.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ok, _ := svc.ConnectionStatus(orgID, projectID, "bench", "google"); ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the stored connection is not visible")
		}
		time.Sleep(10 * time.Millisecond)
	}

	reg := toolrunner.NewRegistry()
	if err := reg.Register(benchTool{}, connTool{token}); err != nil {
		return nil, err
	}
	runner := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hookproxy.DefaultConfig(), quiet), noSources{}, svc, svc, pub, quiet)
	input := map[string]any{"text": "hello"}
	plain := func() error { return executeOK(ctx, runner, sc, "BenchKit.Echo", input) }
	conn := func() error { return executeOK(ctx, runner, sc, "BenchKit.EchoAsUser", input) }

	say("Runner.Execute (in process, no hooks) of a tool needing a valid google connection against one needing none")
	// Interleaved, so that both see the same machine; medians, so that a
	// GC pause or a slow publish acknowledgement does not decide.
	d, err := interleave(connectionSamples, connectionSamples/10, plain, conn)
	if err != nil {
		return nil, err
	}
	p, c := summarize(d[0]), summarize(d[1])
	ref, val := float64(p.P50.Nanoseconds())/1000, float64(c.P50.Nanoseconds())/1000
	say("  no requirement p50 %s p99 %s, valid connection p50 %s p99 %s: %+.1f µs at p50 (goal <= %d µs)",
		p.P50, p.P99, c.P50, c.P99, val-ref, connectionGoalMicros)
	return []Figure{{Name: "execute needing a connection, p50 (µs)", Value: val, Unit: "µs", Reference: ref,
		RefName: fmt.Sprintf("no requirement; goal ref+%dµs", connectionGoalMicros), Goal: (ref + connectionGoalMicros) / ref, Lower: true}}, nil
}

func executeOK(ctx context.Context, r *toolrunner.Runner, sc toolrunner.Scope, tool string, input map[string]any) error {
	res, err := r.Execute(ctx, sc, tool, input)
	if err == nil && !res.Success {
		err = fmt.Errorf("%s: %v", tool, res.Error)
	}
	return err
}

// connTool is benchTool needing a google connection; it checks it got the
// stored token.
type connTool struct{ token string }

func (connTool) Definition() toolrunner.Definition {
	d := benchTool{}.Definition()
	d.Name = "EchoAsUser"
	d.Requirements.Authorization = []toolrunner.AuthRequirement{{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"drive.readonly"}}}
	return d
}

func (t connTool) Run(_ context.Context, c toolrunner.Call) (any, error) {
	if c.Tokens["google"] != t.token {
		return nil, toolrunner.Errorf(toolrunner.KindUpstream, false, "the tool did not get the stored token")
	}
	return c.Inputs, nil
}
