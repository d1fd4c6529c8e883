package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
)

// NATS starts an embedded JetStream server with its store in a temp dir, with
// the auditrail streams created, and returns it with a connected client. Both
// stop when the test ends.
func NATS(t testing.TB) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s, nc := NATSWithoutStreams(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

// NATSWithoutStreams starts an embedded JetStream server in a temp dir with
// no streams, and returns it with a connected client.
func NATSWithoutStreams(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	cfg := natsx.DefaultServerConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.StoreDir = t.TempDir()
	s, err := natsx.StartServer(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}
