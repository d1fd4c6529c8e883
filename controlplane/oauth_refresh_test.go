package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestConnRefreshNamesMatchNATSPermissions(t *testing.T) {
	if ConnRefreshSubject != natsx.ConnRefreshSubject || cpstate.DefaultBucket != natsx.ControlPlaneBucket || cpstate.DefaultStatesBucket != natsx.OAuthStatesBucket {
		t.Fatal("the refresh subject or a bucket differs from the one the NATS permissions name")
	}
}

// roleOpts is a node connected with role's credentials to the production
// bucket, read-only unless it is the control plane.
func roleOpts(t *testing.T, a *testenv.AuthNATS, role string) nodeOpts {
	opts, err := natsx.CredsOptions(a.Creds(role))
	if err != nil {
		t.Fatal(err)
	}
	return nodeOpts{nats: opts, state: func(c *cpstate.StateConfig) {
		c.Bucket, c.StatesBucket, c.ReadOnly = natsx.ControlPlaneBucket, cpstate.DefaultStatesBucket, role != natsx.RoleControlPlane
	}}
}

// The tool runner, with its real NATS credentials (which may not publish to
// the bucket), gets its users' tokens refreshed: the control plane, with
// its own, calls the provider once and stores the tokens for every instance.
func TestConnectionRefreshWithRoleCredentials(t *testing.T) {
	a := testenv.NATSAuth(t)
	e := newOAuthEnv(t, a.Server.ClientURL(), roleOpts(t, a, natsx.RoleControlPlane))
	tr := newNode(t, a.Server.ClientURL(), roleOpts(t, a, natsx.RoleToolRunner))
	tr.svc.log = e.svc.log
	tr.svc.UseOAuth(e.svc.flow) // it makes links; it does not refresh with it
	ctx := context.Background()
	e.connect("bob", e.bob)
	key := cpstate.ConnKey(e.org, e.project, "bob", "corp")
	old := e.remember("bob")

	// Its credentials cannot write the connection key.
	js, _ := jetstream.New(tr.nc)
	kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := kv.Put(wctx, key, []byte(`{}`)); err == nil {
		t.Fatal("the tool runner's credentials wrote a connection key")
	}
	cancel()

	e.expireSoon("bob")
	testenv.Eventually(t, 10*time.Second, "the tool runner sees the expiry", func() bool {
		var u cpstate.UserConnection
		_, err := tr.state.Get(key, &u)
		return err == nil && dueForRefresh(u, time.Now())
	})
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := tr.svc.Connection(ctx, e.org, e.project, "bob", "corp")
			got[i], errs[i] = c.AccessToken, err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || got[i] == old.AccessToken {
			t.Fatalf("call %d: %v (same as the others: %v, the old token: %v)", i, errs[i], got[i] == got[0], got[i] == old.AccessToken)
		}
	}
	e.seen(got[0])
	if _, err := e.emu.Verify(got[0]); err != nil {
		t.Fatalf("the refreshed token does not verify: %v", err)
	}
	if s := e.emu.Stats(); s.RefreshGrants != 1 || e.refreshCalls.Load() != 1 {
		t.Fatalf("%d refresh grants (%d requests) for %d concurrent calls, want 1", s.RefreshGrants, e.refreshCalls.Load(), n)
	}
	// Stored by the control plane: both mirrors hold it.
	testenv.Eventually(t, 10*time.Second, "the mirrors hold the refreshed token", func() bool {
		_, _, a, err1 := e.svc.openConn(key)
		_, _, b, err2 := tr.svc.openConn(key)
		return err1 == nil && err2 == nil && a.AccessToken == got[0] && b.AccessToken == got[0]
	})
	if c, err := tr.svc.Connection(ctx, e.org, e.project, "bob", "corp"); err != nil || c.AccessToken != got[0] || c.APIBaseURL != e.emuURL+"/api" {
		t.Fatalf("after the refresh: %v %+v", err, c)
	}

	// A request whose reply subject is not an inbox gets no answer: the
	// control plane's credentials may answer any requester's reply subject
	// once, and may publish to the bucket (a JSON answer to a purge request
	// would purge it all).
	orgBefore, err := kv.Get(ctx, cpstate.OrgKey(e.org))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(connRefreshRequest{Org: e.org, Project: e.project, User: "bob", Provider: "corp"})
	for _, reply := range []string{"$JS.API.STREAM.PURGE.KV_" + natsx.ControlPlaneBucket, "$KV." + natsx.ControlPlaneBucket + "." + cpstate.OrgKey(e.org),
		"$JS.API.STREAM.DELETE.KV_" + natsx.ControlPlaneBucket} {
		if err := tr.nc.PublishMsg(&nats.Msg{Subject: ConnRefreshSubject, Reply: reply, Data: req}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.nc.Request(ConnRefreshSubject, req, 10*time.Second); err != nil { // answered after those
		t.Fatal(err)
	}
	if after, err := kv.Get(ctx, cpstate.OrgKey(e.org)); err != nil || after.Revision() != orgBefore.Revision() {
		t.Fatalf("the control plane answered into the bucket: %v", err)
	}
	if _, err := kv.Get(ctx, key); err != nil {
		t.Fatalf("the connection after forged reply subjects: %v", err)
	}

	// A refused refresh breaks the connection, for the tool runner too.
	e.remember("bob")
	e.expireSoon("bob")
	e.emu.RevokeUser("u-1")
	testenv.Eventually(t, 10*time.Second, "the tool runner sees the expiry", func() bool {
		var u cpstate.UserConnection
		_, err := tr.state.Get(key, &u)
		return err == nil && dueForRefresh(u, time.Now())
	})
	if _, err := tr.svc.Connection(ctx, e.org, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNotConnected) {
		t.Fatalf("refused refresh: %v", err)
	}
	if items := e.list("bob", e.bob); len(items) != 1 || items[0].Status != "broken" {
		t.Fatalf("after invalid_grant: %+v", items)
	}
}

// The refresh service answers only well-formed requests for existing
// connections, and only on an inbox.
func TestConnRefreshRequests(t *testing.T) {
	srv, nc, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	e.connect("bob", e.bob)
	ctx := context.Background()
	ask := func(body any) connRefreshReply {
		t.Helper()
		b, _ := json.Marshal(body)
		if s, ok := body.(string); ok {
			b = []byte(s)
		}
		m, err := nc.Request(ConnRefreshSubject, b, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r connRefreshReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		body any
		code string
	}{
		{"not JSON", "{", refreshInvalid},
		{"organization not a UUID", connRefreshRequest{Org: "acme", Project: e.project, User: "bob", Provider: "corp"}, refreshInvalid},
		{"no user", connRefreshRequest{Org: e.org, Project: e.project, Provider: "corp"}, refreshInvalid},
		{"no such connection", connRefreshRequest{Org: e.org, Project: e.project, User: "carol", Provider: "corp"}, refreshNotConnected},
		{"another project", connRefreshRequest{Org: e.org, Project: "3b5e1c88-2f0a-4d6b-9c1e-5a4f8e7d6c02", User: "bob", Provider: "corp"}, refreshNotConnected},
		{"a valid connection", connRefreshRequest{Org: e.org, Project: e.project, User: "bob", Provider: "corp"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ask(tc.body)
			if r.Code != tc.code || (tc.code == "") != (len(r.Sealed) > 0) {
				t.Fatalf("answer %+v, want code %q", r, tc.code)
			}
		})
	}
	// The answer is sealed: it holds no token in the clear.
	r := ask(connRefreshRequest{Org: e.org, Project: e.project, User: "bob", Provider: "corp"})
	tok := e.remember("bob")
	if b, _ := json.Marshal(r); strings.Contains(string(b), tok.AccessToken) || strings.Contains(string(b), tok.RefreshToken) {
		t.Fatalf("the answer holds a token: %s", b)
	}
	// A reply subject that is not an inbox gets nothing: the control plane
	// would otherwise write its answer to the bucket.
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "cp_test")
	if err != nil {
		t.Fatal(err)
	}
	before, err := kv.Get(ctx, cpstate.OrgKey(e.org))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(connRefreshRequest{Org: e.org, Project: e.project, User: "bob", Provider: "corp"})
	for _, target := range []string{"$KV.cp_test." + cpstate.OrgKey(e.org), "$JS.API.STREAM.PURGE.KV_cp_test", "_INBOX_x.*", ""} {
		if err := nc.PublishMsg(&nats.Msg{Subject: ConnRefreshSubject, Reply: target, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	_ = ask(connRefreshRequest{Org: e.org, Project: "x"}) // served after the one above
	if after, err := kv.Get(ctx, cpstate.OrgKey(e.org)); err != nil || after.Revision() != before.Revision() {
		t.Fatalf("the control plane answered into the bucket: %v", err)
	}
	// A read-only state serves nothing.
	ro := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *cpstate.StateConfig) { c.ReadOnly = true }})
	if err := ro.svc.ServeConnRefresh(ctx); !errors.Is(err, cpstate.ErrReadOnly) {
		t.Fatalf("read-only ServeConnRefresh: %v", err)
	}
	e.clean()
}

// A stream that captures the refresh subject acknowledges each request on
// the requester's inbox: the tool runner waits for the control plane's
// answer all the same. With no control plane, the refresh fails at once
// and is not ErrNotConnected (AUTHORIZATION_FAILED, retry).
func TestConnRefreshAnswerOfTheControlPlaneOnly(t *testing.T) {
	srv, _, js := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CAPTURE", Subjects: []string{ConnRefreshSubject}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	ro := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *cpstate.StateConfig) { c.ReadOnly = true }})
	ro.svc.log = e.svc.log
	e.connect("bob", e.bob)
	old := e.remember("bob")
	key := cpstate.ConnKey(e.org, e.project, "bob", "corp")
	e.expireSoon("bob")
	testenv.Eventually(t, 10*time.Second, "the reader sees the expiry", func() bool {
		var u cpstate.UserConnection
		_, err := ro.state.Get(key, &u)
		return err == nil && dueForRefresh(u, time.Now())
	})
	c, err := ro.svc.Connection(ctx, e.org, e.project, "bob", "corp")
	if err != nil || c.AccessToken == old.AccessToken {
		t.Fatalf("refresh with a capturing stream: %v", err)
	}
	e.seen(c.AccessToken)

	// No control plane at all (the bucket's creator is not running).
	srv2, _, _ := testenv.NATS(t)
	newNode(t, srv2.ClientURL(), nodeOpts{})
	lone := newNode(t, srv2.ClientURL(), nodeOpts{state: func(c *cpstate.StateConfig) { c.ReadOnly = true }})
	start := time.Now()
	_, err = lone.svc.refreshByControlPlane(ctx, e.org, e.project, "bob", "corp")
	if err == nil || errors.Is(err, ErrNotConnected) || !errors.Is(err, nats.ErrNoResponders) || time.Since(start) > 5*time.Second {
		t.Fatalf("without a control plane: %v after %s", err, time.Since(start))
	}
	e.clean()
}
