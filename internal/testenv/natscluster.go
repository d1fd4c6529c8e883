package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
)

// NATSCluster is a JetStream cluster of embedded nats-servers in this
// process, in operator mode as the roles use it (see NATSAuth): each
// server has its own name, store, client and route ports, the same across
// restarts, so a test stops and starts them one by one.
type NATSCluster struct {
	t        testing.TB
	Auth     *natsx.Auth
	CredsDir string
	// TLS is the PKI of the cluster: clients connect over TLS with a
	// client certificate, and the routes between the servers are TLS.
	TLS *TLSFiles

	mu      sync.Mutex
	cfgs    []natsx.ServerConfig
	servers []*server.Server
}

// NewNATSCluster starts n clustered servers and waits until JetStream has a
// meta leader; it creates no stream. The servers stop when the test ends.
// Every connection is TLS: clients present a certificate (TLSArgs gives a
// role's flags), and the routes verify each other's.
func NewNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteCreds(dir); err != nil {
		t.Fatal(err)
	}
	c := &NATSCluster{t: t, Auth: auth, CredsDir: dir, TLS: NewTLSFiles(t)}
	serverTLS, routeTLS := c.TLS.ServerConfig(t, true), c.TLS.ServerConfig(t, true)
	routeTLS.RootCAs = routeTLS.ClientCAs
	routes := make([]string, n)
	clients := make([]int, n)
	for i := range n {
		rp, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if clients[i], err = FreePort(); err != nil {
			t.Fatal(err)
		}
		routes[i] = fmt.Sprintf("127.0.0.1:%d", rp)
	}
	for i := range n {
		cfg := natsx.DefaultServerConfig()
		cfg.Listen = fmt.Sprintf("127.0.0.1:%d", clients[i])
		cfg.StoreDir = t.TempDir()
		cfg.Auth, cfg.TLS = auth, serverTLS
		cfg.Name = fmt.Sprintf("auditrail-test-%d", i)
		cfg.ReadyTimeout = 30 * time.Second
		cc := &natsx.ClusterConfig{Name: "auditrail-test", Listen: routes[i], TLS: routeTLS}
		for j, r := range routes {
			if j != i {
				cc.Routes = append(cc.Routes, "nats-route://"+r)
			}
		}
		cfg.Cluster = cc
		c.cfgs = append(c.cfgs, cfg)
		c.servers = append(c.servers, nil)
	}
	// Started at once: a server waits for its peers to elect a meta leader.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := natsx.StartServer(c.cfgs[i])
			c.mu.Lock()
			c.servers[i], errs[i] = s, err
			c.mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range n {
			c.Stop(i)
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start nats %d: %v", i, err)
		}
	}
	c.WaitJetStream(t)
	return c
}

// Len is the number of servers.
func (c *NATSCluster) Len() int { return len(c.cfgs) }

// Name is the server_name of server i.
func (c *NATSCluster) Name(i int) string { return c.cfgs[i].Name }

// Index is the index of the server named name, or -1.
func (c *NATSCluster) Index(name string) int {
	for i, cfg := range c.cfgs {
		if cfg.Name == name {
			return i
		}
	}
	return -1
}

// URL is the client URL of every server, comma-separated, as --nats-url
// takes it: a client reconnects to another one when its server stops.
func (c *NATSCluster) URL() string {
	urls := make([]string, len(c.cfgs))
	for i, cfg := range c.cfgs {
		urls[i] = "nats://" + cfg.Listen
	}
	return strings.Join(urls, ",")
}

// Running reports whether server i runs.
func (c *NATSCluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i] != nil
}

// Stop shuts server i down (a stopped server stays stopped).
func (c *NATSCluster) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Start starts server i again, on its ports and store.
func (c *NATSCluster) Start(i int) {
	s, err := natsx.StartServer(c.cfgs[i])
	if err != nil {
		c.t.Errorf("restart nats %d: %v", i, err)
		return
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
}

// WaitJetStream waits (at most 60 s) until a running server is the
// JetStream meta leader and every running one is current.
func (c *NATSCluster) WaitJetStream(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		leader, current := false, true
		for _, s := range c.servers {
			if s == nil {
				continue
			}
			leader = leader || s.JetStreamIsLeader()
			current = current && s.JetStreamIsCurrent()
		}
		c.mu.Unlock()
		if leader && current {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("nats cluster: no JetStream meta leader after 60 s")
}

// Creds is the credentials file of role.
func (c *NATSCluster) Creds(role string) string { return natsx.CredsFile(c.CredsDir, role) }

func (c *NATSCluster) tlsFiles() natsx.TLSFiles {
	return natsx.TLSFiles{CA: c.TLS.CA, Cert: c.TLS.ClientCert, Key: c.TLS.ClientKey}
}

// TLSArgs are the flags of a role that connects to the cluster.
func (c *NATSCluster) TLSArgs() []string {
	return []string{"--nats-tls-ca", c.TLS.CA, "--nats-tls-cert", c.TLS.ClientCert, "--nats-tls-key", c.TLS.ClientKey}
}

// Connect connects to the cluster with the credentials of role, reconnecting
// for ever; the connection closes when the test ends.
func (c *NATSCluster) Connect(t testing.TB, role string) *nats.Conn {
	t.Helper()
	opts, err := natsx.CredsOptions(c.Creds(role))
	if err != nil {
		t.Fatal(err)
	}
	topts, err := c.tlsFiles().Options()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(append(opts, topts...), nats.Name("test-"+role), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	nc, err := nats.Connect(c.URL(), opts...)
	if err != nil {
		t.Fatalf("connect nats cluster as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Leader is the index of the server that leads stream (a KV bucket is
// KV_<bucket>), waiting up to 30 s for one to be elected.
func (c *NATSCluster) Leader(t testing.TB, js jetstream.JetStream, stream string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, stream)
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil {
			if i := c.Index(st.CachedInfo().Cluster.Leader); i >= 0 {
				return i
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("stream %s: no leader after 30 s (%v)", stream, last)
	return -1
}
