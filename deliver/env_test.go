package deliver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

const bootKey = "bootstrap-key-of-the-deliver-tests"

// env is a NATS server in operator mode, a control plane (its admin API
// on app) and the destinations as the delivery role reads them, with its
// own credentials.
type env struct {
	t     *testing.T
	ctx   context.Context
	a     *testenv.AuthNATS
	admin jetstream.JetStream
	app   *fiber.App
	src   *cpstate.DestinationReader
	djs   jetstream.JetStream // the deliver role's
	org   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithCancel(context.Background())
	admin, err := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	cpNC := a.Connect(t, natsx.RoleControlPlane)
	cpJS, _ := jetstream.New(cpNC)
	state, err := cpstate.OpenState(ctx, cpJS, cpstate.DefaultStateConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := cpstate.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := producers.New(cpNC, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := controlplane.NewService(controlplane.DefaultServiceConfig(), state, cpstate.NewAccess(state, auth.HashKey(bootKey), nil), sealer,
		producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.UseEgress(egress.AllowLoopback())
	app := httpapi.NewApp(nil)
	svc.Register(app)
	done := make(chan struct{})
	go func() { defer close(done); _ = svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	dNC := a.Connect(t, natsx.RoleDeliver)
	djs, _ := jetstream.New(dNC)
	ro := cpstate.DefaultStateConfig()
	ro.ReadOnly = true
	dstate, err := cpstate.OpenState(ctx, djs, ro, nil)
	if err != nil {
		t.Fatalf("the deliver role mirrors the control-plane state: %v", err)
	}
	e := &env{t: t, ctx: ctx, a: a, admin: admin, app: app, src: cpstate.NewDestinationReader(dstate, sealer), djs: djs}
	var org struct {
		ID string `json:"id"`
	}
	e.must(201, "POST", "/api/v1/orgs", map[string]any{"name": "acme"}, &org)
	e.org = org.ID
	return e
}

// call sends a request to the admin API as the platform admin and
// decodes data into out; it returns the status and msg.
func (e *env) call(method, path string, body, out any) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bootKey)
	resp, err := e.app.Test(req, -1)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &env); err != nil {
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			e.t.Fatalf("%s %s: data %s: %v", method, path, env.Data, err)
		}
	}
	return resp.StatusCode, env.Msg
}

func (e *env) must(status int, method, path string, body, out any) {
	e.t.Helper()
	if got, msg := e.call(method, path, body, out); got != status {
		e.t.Fatalf("%s %s: %d %s (want %d)", method, path, got, msg, status)
	}
}

// destination creates a destination and returns its id.
func (e *env) destination(body map[string]any) string {
	e.t.Helper()
	var d struct {
		ID string `json:"id"`
	}
	e.must(201, "POST", "/api/v1/orgs/"+e.org+"/destinations", body, &d)
	return d.ID
}

func (e *env) destPath(id string) string { return "/api/v1/orgs/" + e.org + "/destinations/" + id }

// status is GET …/destinations/{id}.
type status struct {
	Status          string     `json:"status"`
	LastDeliveredAt *time.Time `json:"last_delivered_at"`
	LagSeconds      float64    `json:"lag_seconds"`
	Pending         uint64     `json:"pending"`
	Failures        int        `json:"failures"`
	LastError       string     `json:"last_error"`
	Secret          string     `json:"secret"`
	Token           string     `json:"token"`
}

func (e *env) status(id string) status {
	e.t.Helper()
	var s status
	e.must(200, "GET", e.destPath(id), nil, &s)
	return s
}

// publish publishes n audit events of the org with timestamp ts on the
// event stream (as producers do) and returns their event ids.
func (e *env) publish(n int, ts time.Time, rt schemas.ResourceType) []string {
	e.t.Helper()
	org := uuid.MustParse(e.org)
	var ids []string
	for i := 0; i < n; i++ {
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: ts.Add(time.Duration(i) * time.Millisecond), Action: schemas.AuditActionCreated,
			Source: schemas.AuditSourceAPI, DisplayName: "alice", OrganizationID: org, PrincipalID: "alice", PrincipalType: "ACCOUNT",
			ResourceType: &rt, ResourceID: schemas.Ptr("k1"), ResourceDisplay: schemas.Ptr("key one")}
		m, err := producers.Message(&ev)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.admin.PublishMsg(e.ctx, m); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, ev.EventID.String())
	}
	return ids
}

// testConfig shortens every timing of the delivery role.
func testConfig() deliver.Config {
	cfg := deliver.DefaultConfig()
	cfg.Tick, cfg.LeaseTTL, cfg.FetchWait, cfg.StatusEvery = 50*time.Millisecond, time.Second, 100*time.Millisecond, 100*time.Millisecond
	cfg.Retry = retry.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	cfg.RequestTimeout, cfg.AckWait, cfg.CleanupAge = 2*time.Second, 10*time.Second, time.Second
	return cfg
}

// run starts a deliverer with the deliver role's credentials until the
// test ends (or stop).
func (e *env) run(cfg deliver.Config, guard deliver.Guard) (*deliver.Deliverer, func()) {
	e.t.Helper()
	return e.runObserved(cfg, guard, nil)
}

// runObserved is run reporting to obs (none when nil).
func (e *env) runObserved(cfg deliver.Config, guard deliver.Guard, obs deliver.Observer) (*deliver.Deliverer, func()) {
	e.t.Helper()
	if guard == nil {
		guard = egress.AllowLoopback()
	}
	d, err := deliver.New(e.djs, e.src, guard, cfg, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if obs != nil {
		d.ObserveWith(obs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("deliverer: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return d, stop
}

// receiver is a deliver.Receiver on a real listener that also keeps the
// lines it accepted; it can go down and come back on the same address.
type receiver struct {
	t    *testing.T
	r    *deliver.Receiver
	addr string
	mu   sync.Mutex
	srv  *http.Server
	rows []map[string]any
}

func newReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	r, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, r: r}
	rc.up()
	t.Cleanup(rc.down)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	rc.r.ServeHTTP(rec, req)
	if rec.Code == 200 && req.Method == http.MethodPost {
		rc.mu.Lock()
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				rc.rows = append(rc.rows, m)
			}
		}
		rc.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// up listens (on the same address as before, after down).
func (rc *receiver) up() {
	addr := rc.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.addr = ln.Addr().String()
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	rc.mu.Lock()
	rc.srv = srv
	rc.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the listener and every connection.
func (rc *receiver) down() {
	rc.mu.Lock()
	srv := rc.srv
	rc.srv = nil
	rc.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (rc *receiver) url() string { return "http://" + rc.addr + "/events" }

func (rc *receiver) lines() []map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]map[string]any(nil), rc.rows...)
}

// sameSet reports whether got holds exactly the ids of want.
func sameSet(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	m := map[string]bool{}
	for _, id := range want {
		m[id] = true
	}
	for _, id := range got {
		if !m[id] {
			return false
		}
	}
	return true
}
