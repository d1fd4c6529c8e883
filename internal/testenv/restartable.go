package testenv

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
)

// RestartableNATS is an embedded JetStream server that a test stops and
// starts again on the same port and store, for outage tests.
type RestartableNATS struct {
	t   testing.TB
	cfg natsx.ServerConfig
	s   *server.Server
}

// NewRestartableNATS starts the server with the auditrail streams, and a
// client that reconnects for ever; both stop when the test ends.
func NewRestartableNATS(t testing.TB) (*RestartableNATS, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := natsx.DefaultServerConfig()
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.StoreDir = t.TempDir()
	r := &RestartableNATS{t: t, cfg: cfg}
	r.Start()
	t.Cleanup(r.Stop)
	nc, err := natsx.Connect(r.URL(), t.Name(), "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return r, nc, withStreams(t, nc)
}

// URL is the server's client URL (the same across restarts).
func (r *RestartableNATS) URL() string { return "nats://" + r.cfg.Listen }

// Start starts the server (again).
func (r *RestartableNATS) Start() {
	s, err := natsx.StartServer(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.s = s
}

// Stop stops the server; a stopped server stays stopped.
func (r *RestartableNATS) Stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}
