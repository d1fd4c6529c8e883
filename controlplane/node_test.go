package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

const bootKey = "bootstrap-key-of-the-controlplane-tests"

// node is one control-plane process: its own NATS connection, state
// mirror, admin service and HTTP app.
type node struct {
	t     *testing.T
	nc    *nats.Conn
	state *cpstate.State
	svc   *Service
	app   *fiber.App
	ctx   context.Context
	stop  context.CancelFunc
}

type nodeOpts struct {
	state   func(*cpstate.StateConfig)
	service func(*ServiceConfig)
	timeout time.Duration // recorder timeout
	nats    []nats.Option // more connect options (a role's credentials)
	log     *slog.Logger  // the state's logger (nil: none)
}

func newNode(t *testing.T, url string, o nodeOpts) *node {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, o.nats...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scfg := cpstate.DefaultStateConfig()
	scfg.Bucket = "cp_test"
	if o.state != nil {
		o.state(&scfg)
	}
	state, err := cpstate.OpenState(ctx, js, scfg, o.log)
	if err != nil {
		t.Fatal(err)
	}
	access := cpstate.NewAccess(state, auth.HashKey(bootKey), nil)
	sealer, err := cpstate.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	cfg := DefaultServiceConfig()
	if o.service != nil {
		o.service(&cfg)
	}
	svc, err := NewService(cfg, state, access, sealer, producers.NewRecorder(pub, timeout), httpx.TrustedProxies{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	svc.Register(app)
	return &node{t: t, nc: nc, state: state, svc: svc, app: app, ctx: ctx, stop: cancel}
}

// run starts the node's outbox sweep until the test ends.
func (n *node) run() {
	done := make(chan struct{})
	go func() { defer close(done); _ = n.svc.Run(n.ctx) }()
	n.t.Cleanup(func() { n.stop(); <-done })
}

type reply struct {
	status int
	header http.Header
	Msg    string          `json:"msg"`
	Data   json.RawMessage `json:"data"`
}

func (r reply) field(name string) string {
	var m map[string]any
	_ = json.Unmarshal(r.Data, &m)
	s, _ := m[name].(string)
	return s
}

func (n *node) call(method, path, token string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.app.Test(req, -1)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &r); err != nil {
		n.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return r
}

func (n *node) must(status int, method, path, token string, body any) reply {
	n.t.Helper()
	r := n.call(method, path, token, body)
	if r.status != status {
		n.t.Fatalf("%s %s: %d %s (want %d)", method, path, r.status, r.Msg, status)
	}
	return r
}

// eventIDs returns the Nats-Msg-Id of every message of the audit stream.
func eventIDs(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		ids = append(ids, m.Header.Get(schemas.HeaderMsgID))
	}
	slices.Sort(ids)
	return ids
}

func count(ids []string, id string) int {
	n := 0
	for _, v := range ids {
		if v == id {
			n++
		}
	}
	return n
}
