package toolrunner_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
)

// BenchmarkExecuteConnection: an execution of a tool that needs a user's
// connection against one that needs none, events published to an
// embedded NATS (the figure of `make bench` is the lead's; this one shows
// the runner's own share: one Connection call per provider, nothing else).
func BenchmarkExecuteConnection(b *testing.B) {
	_, nc, _ := testenv.NATS(b)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	plain := toolrunner.Definition{Toolkit: "BenchKit", Name: "Plain", Version: "1.0.0", Output: toolrunner.Output{Type: "string"}}
	authd := plain
	authd.Name = "Authd"
	authd.Requirements.Authorization = []toolrunner.AuthRequirement{{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"drive"}}}
	reg := toolrunner.NewRegistry()
	run := func(_ context.Context, c toolrunner.Call) (any, error) { return c.Tokens["google"], nil }
	if err := reg.Register(testTool{plain, run}, testTool{authd, run}); err != nil {
		b.Fatal(err)
	}
	src := newSources()
	src.conns["u1/google"] = oauthflow.Connection{AccessToken: "ya29.t", Scopes: []string{"drive", "email"}}
	r := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hookproxy.DefaultConfig(), nil), src, src, src, pub, nil)
	sc := toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1"}
	for _, tool := range []string{"BenchKit.Plain", "BenchKit.Authd"} {
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				res, err := r.Execute(context.Background(), sc, tool, nil)
				if err != nil || !res.Success {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}
