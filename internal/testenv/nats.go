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
	return s, nc, withStreams(t, nc)
}

// withStreams creates the auditrail streams through nc and returns its
// JetStream context.
func withStreams(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	return js
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
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() }) // its goroutines gone before goleak looks
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// AuthNATS is an embedded JetStream server in operator mode (as `auditrail
// dev` runs it): the credentials of every role are in CredsDir.
type AuthNATS struct {
	Server   *server.Server
	Auth     *natsx.Auth
	CredsDir string
}

// NATSAuth starts an embedded JetStream server that refuses anonymous
// connections, writes the credentials of every role, and creates the
// auditrail streams with the admin credentials. It stops when the test ends.
func NATSAuth(t testing.TB) *AuthNATS {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteCreds(dir); err != nil {
		t.Fatal(err)
	}
	cfg := natsx.DefaultServerConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.StoreDir = t.TempDir()
	cfg.Auth = auth
	s, err := natsx.StartServer(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() }) // its goroutines gone before goleak looks
	a := &AuthNATS{Server: s, Auth: auth, CredsDir: dir}
	js, err := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	return a
}

// Creds is the credentials file of role.
func (a *AuthNATS) Creds(role string) string { return natsx.CredsFile(a.CredsDir, role) }

// Connect connects with the credentials of role; the connection closes when
// the test ends. Asynchronous errors (permission violations) go to errs of
// the returned connection's handler: see ConnectErrs.
func (a *AuthNATS) Connect(t testing.TB, role string) *nats.Conn {
	t.Helper()
	nc, _ := a.ConnectErrs(t, role)
	return nc
}

// ConnectErrs is Connect, also returning the channel of the connection's
// asynchronous errors (such as permission violations).
func (a *AuthNATS) ConnectErrs(t testing.TB, role string) (*nats.Conn, <-chan error) {
	t.Helper()
	opts, err := natsx.CredsOptions(a.Creds(role))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 64)
	opts = append(opts, nats.Name("test-"+role), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect(a.Server.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect nats as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}
