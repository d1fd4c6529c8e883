//go:build e2e

package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// roleServices are the auditrail role services of doc by role: each name
// is <role>-<n>.
func roleServices(doc composeFile) map[string][]string {
	out := map[string][]string{}
	for name := range doc.Services {
		for _, role := range []string{"ingest", "query", "controlplane", "toolrunner", "deliver"} {
			if strings.HasPrefix(name, role+"-") {
				out[role] = append(out[role], name)
			}
		}
	}
	return out
}

// docker-compose.yml parses, every auditrail role connects to NATS with its
// own credentials over TLS, and the nats service loads the include and the
// TLS files that `auditrail nats-setup` (as the compose file runs it)
// writes: a server started from the cluster configuration accepts each
// role's credentials over TLS checked against the CA the roles are given,
// and refuses an anonymous client and a client without TLS; two servers
// form a route over TLS verified both ways, and a route without a
// certificate of the CA is refused. (Docker itself cannot run here.)
func TestComposeNATSAuth(t *testing.T) {
	doc := readCompose(t)
	roles := roleServices(doc)
	creds := map[string]string{"ingest": "ingest", "query": "query", "controlplane": "controlplane", "toolrunner": "toolrunner", "deliver": "deliver"}
	for role, want := range creds {
		if len(roles[role]) < 2 {
			t.Errorf("%s runs %d times, want 2", role, len(roles[role]))
		}
		for _, svc := range roles[role] {
			s := doc.Services[svc]
			if got := s.Environment["AUDITRAIL_NATS_CREDS"]; got != "/nats-auth/"+want+".creds" {
				t.Errorf("%s: AUDITRAIL_NATS_CREDS %q, want the %s credentials", svc, got, want)
			}
			if !strings.Contains(strings.Join(s.Volumes, " "), "nats-auth:/nats-auth:ro") {
				t.Errorf("%s does not mount nats-auth read-only: %v", svc, s.Volumes)
			}
			if s.Environment["AUDITRAIL_NATS_URL"] == "" {
				t.Errorf("%s: no AUDITRAIL_NATS_URL (the env anchor was not merged)", svc)
			}
		}
	}
	if got := doc.Services["emit"].Environment["AUDITRAIL_NATS_CREDS"]; got != "/nats-auth/admin.creds" {
		t.Errorf("emit: AUDITRAIL_NATS_CREDS %q", got)
	}
	// Every client of NATS checks the servers against the CA nats-setup
	// writes beside the credentials; only the servers (and nats-setup)
	// mount the servers' key.
	for svc, s := range doc.Services {
		if s.Environment["AUDITRAIL_NATS_URL"] != "" && s.Environment["AUDITRAIL_NATS_TLS_CA"] != "/nats-auth/ca.pem" {
			t.Errorf("%s connects to NATS without TLS (AUDITRAIL_NATS_TLS_CA %q)", svc, s.Environment["AUDITRAIL_NATS_TLS_CA"])
		}
		natsServer := strings.HasPrefix(svc, "nats-") && svc != "nats-setup"
		mountsTLS := strings.Contains(strings.Join(s.Volumes, " "), "nats-tls:")
		switch {
		case natsServer && !slices.Contains(s.Volumes, "nats-tls:/etc/nats/tls:ro"):
			t.Errorf("%s does not mount nats-tls read-only at /etc/nats/tls: %v", svc, s.Volumes)
		case !natsServer && svc != "nats-setup" && mountsTLS:
			t.Errorf("%s mounts the NATS servers' key", svc)
		}
	}
	setup := doc.Services["nats-setup"]
	if len(setup.Command) == 0 || setup.Command[0] != "nats-setup" {
		t.Fatalf("nats-setup command %v", setup.Command)
	}
	for _, v := range []string{"nats-auth", "nats-keys"} {
		if _, ok := doc.Volumes[v]; !ok {
			t.Errorf("volume %s not declared", v)
		}
	}
	for svc, s := range doc.Services {
		if svc != "nats-setup" && strings.Contains(strings.Join(s.Volumes, " "), "nats-keys") {
			t.Errorf("%s mounts the seeds", svc)
		}
		// The key of the stream credentials: the control plane's only.
		if svc != "nats-setup" && !strings.HasPrefix(svc, "controlplane-") && strings.Contains(strings.Join(s.Volumes, " "), "nats-stream") {
			t.Errorf("%s mounts the stream credentials' key", svc)
		}
	}
	for _, svc := range roles["controlplane"] {
		if cp := doc.Services[svc]; !strings.Contains(strings.Join(cp.Volumes, " "), "nats-stream:/nats-stream:ro") ||
			cp.Environment["AUDITRAIL_NATS_STREAM_KEY_FILE"] != "/nats-stream/siem.nk" {
			t.Errorf("%s lacks the stream credentials' key: %v %v", svc, cp.Volumes, cp.Environment)
		}
	}
	natsServers := 0
	for svc, s := range doc.Services {
		if strings.HasPrefix(svc, "nats-") && svc != "nats-setup" {
			natsServers++
			if strings.Join(s.Command, " ") != "-c /etc/nats/cluster.conf" || !strings.Contains(strings.Join(s.Volumes, " "), "nats-auth:/etc/nats/auth:ro") ||
				s.Environment["SERVER_NAME"] != svc {
				t.Errorf("%s: command %v, volumes %v, env %v", svc, s.Command, s.Volumes, s.Environment)
			}
		}
	}
	if natsServers != 3 {
		t.Errorf("%d NATS servers, want a cluster of 3", natsServers)
	}

	// Run the setup command with the volumes mapped to temp dirs.
	dir := t.TempDir()
	args := make([]string, len(setup.Command))
	for i, a := range setup.Command {
		a = strings.ReplaceAll(a, "/nats-auth", filepath.Join(dir, "auth"))
		a = strings.ReplaceAll(a, "/nats-stream", filepath.Join(dir, "stream"))
		a = strings.ReplaceAll(a, "/nats-tls", filepath.Join(dir, "tls"))
		args[i] = strings.ReplaceAll(a, "/nats-keys", filepath.Join(dir, "keys"))
	}
	if out, err := exec.Command(binary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("nats-setup: %v\n%s", err, out)
	}
	// The cluster configuration as the nats services load it: next to the
	// include, in auth/, the TLS files where nats-tls is mounted.
	conf, err := os.ReadFile("../../deploy/nats/cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "/etc/nats/tls/") {
		t.Fatal("cluster.conf names no file of /etc/nats/tls (the nats-tls volume)")
	}
	conf = []byte(strings.ReplaceAll(string(conf), "/etc/nats/tls/", filepath.Join(dir, "tls")+"/"))
	if err := os.WriteFile(filepath.Join(dir, "cluster.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SERVER_NAME", "nats-2")
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "cluster.conf"))
	if err != nil {
		t.Fatalf("the cluster configuration with the include does not load: %v", err)
	}
	if opts.ServerName != "nats-2" || opts.Cluster.Name != "auditrail" || len(opts.Routes) != 3 || !opts.JetStream || len(opts.TrustedOperators) != 1 {
		t.Fatalf("cluster configuration: name %q, cluster %q, %d routes, jetstream %v, %d operators", opts.ServerName, opts.Cluster.Name, len(opts.Routes), opts.JetStream, len(opts.TrustedOperators))
	}
	if opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("cluster configuration: client TLS %v, cluster TLS %v (verify required)", opts.TLSConfig != nil, opts.Cluster.TLSConfig)
	}
	if opts.HTTPHost != "127.0.0.1" {
		t.Errorf("monitoring listens on %q, not inside the container only", opts.HTTPHost)
	}
	checkNATSRoutesTLS(t, opts)
	// Served here alone (the other servers' names do not resolve).
	opts.Cluster, opts.Routes, opts.HTTPPort = server.ClusterOpts{}, nil, 0
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoSigs, opts.NoLog = "127.0.0.1", server.RANDOM_PORT, true, t.TempDir(), true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server from the include not ready")
	}
	// The roles' TLS: the CA that nats-setup put beside the credentials,
	// the server's name as the compose network resolves it.
	caFile := filepath.Join(dir, "auth", "ca.pem")
	roleTLS := func() nats.Option {
		cfg, err := natsx.TLSFiles{CA: caFile}.Config()
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "nats-2"
		return nats.Secure(cfg)
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0), roleTLS()); err == nil {
		nc.Close()
		t.Fatal("anonymous connection accepted")
	}
	for _, role := range natsx.Roles {
		copts, err := natsx.CredsOptions(filepath.Join(dir, "auth", role+".creds"))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), append(copts, roleTLS())...)
		if err != nil {
			t.Fatalf("%s credentials refused: %v", role, err)
		}
		if !nc.TLSRequired() {
			t.Errorf("%s: the server does not require TLS", role)
		}
		nc.Close()
	}
	// Without TLS, or trusting another CA, valid credentials get nowhere.
	copts, err := natsx.CredsOptions(filepath.Join(dir, "auth", "ingest.creds"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = plain.SetDeadline(time.Now().Add(5 * time.Second))
	info, _ := bufio.NewReader(plain).ReadString('\n')
	plain.Close()
	if !strings.Contains(info, `"tls_required":true`) {
		t.Errorf("the server does not require TLS of its clients: %s", info)
	}
	if nc, err := nats.Connect(s.ClientURL(), append(copts, nats.MaxReconnects(0), nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, ServerName: "nats-2"}))...); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the deployment's CA connected (it would trust any server)")
	}
	// A stream credential signed with the key the control plane gets
	// connects to the server of the include (account AUDITRAIL_SIEM).
	signer, err := natsx.LoadStreamSigner(filepath.Join(dir, "stream", "siem.nk"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "1a000000-0000-4000-8000-00000000001a"
	siem, _, err := signer.Issue("0a000000-0000-4000-8000-00000000000a", id, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	credsPath := filepath.Join(dir, "siem.creds")
	if err := os.WriteFile(credsPath, siem, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(credsPath), nats.CustomInboxPrefix(natsx.StreamInboxPrefix(id)), roleTLS())
	if err != nil {
		t.Fatalf("a stream credential is refused by the include's server: %v", err)
	}
	nc.Close()
	if fi, err := os.Stat(filepath.Join(dir, "stream", "siem.nk")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stream credentials key: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "keys", "operator.nk")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operator seed: %v %v", fi, err)
	}
	for _, f := range []string{filepath.Join(dir, "tls", natsx.ServerKeyFile), filepath.Join(dir, "keys", natsx.CAKeyFile)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi, err)
		}
	}
}

// checkNATSRoutesTLS starts two servers with the cluster TLS of opts (the
// compose file's, loaded) and no JetStream: their route comes up over TLS
// verified both ways (each server is named nats-1 as the compose network
// resolves it; the servers share a certificate for every name), and a
// peer without a certificate of the deployment's CA cannot open a route.
func checkNATSRoutesTLS(t *testing.T, loaded *server.Options) {
	t.Helper()
	start := func(name string, routes []*url.URL) *server.Server {
		t.Helper()
		o := loaded.Clone()
		o.ServerName, o.JetStream, o.HTTPPort, o.NoSigs, o.NoLog = name, false, 0, true, true
		o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", server.RANDOM_PORT
		o.Cluster.TLSConfig = loaded.Cluster.TLSConfig.Clone()
		o.Cluster.TLSConfig.ServerName = "nats-1"
		o.Routes = routes
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("%s not ready", name)
		}
		return s
	}
	a := start("nats-a", nil)
	routeURL, _ := url.Parse("nats://" + a.ClusterAddr().String())
	b := start("nats-b", []*url.URL{routeURL})
	testenv.Eventually(t, 10*time.Second, func() string {
		return fmt.Sprintf("a route over the cluster TLS: %d and %d routes", a.NumRoutes(), b.NumRoutes())
	}, func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 })
	// A peer that trusts the CA, speaking the route protocol (TLS first,
	// then the server's INFO): with the deployment's certificate it gets
	// the INFO; without a certificate of its own, nothing.
	routePeer := func(certs []tls.Certificate) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", a.ClusterAddr().String(),
			&tls.Config{RootCAs: loaded.Cluster.TLSConfig.ClientCAs, ServerName: "nats-1", MinVersion: tls.VersionTLS12, Certificates: certs})
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "INFO ") {
			err = fmt.Errorf("answer %q", line)
		}
		return err
	}
	if err := routePeer(loaded.Cluster.TLSConfig.Certificates); err != nil {
		t.Fatalf("a peer with the deployment's certificate: %v", err)
	}
	if err := routePeer(nil); err == nil {
		t.Fatal("a route without a client certificate was accepted")
	} else {
		t.Logf("a route without a certificate: %v", err)
	}
}

// helpOf is the flags and environment variables `auditrail <cmd> -h` lists.
func helpOf(t *testing.T, cmd string) (flags, envs map[string]bool) {
	t.Helper()
	out, _ := exec.Command(binary(t), cmd, "-h").CombinedOutput()
	flags, envs = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\(env ([A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
		envs[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("auditrail %s -h lists no flag:\n%s", cmd, out)
	}
	if flags["clickhouse-password-file"] {
		envs[envClickHousePassword] = true // read apart from the flags
	}
	return flags, envs
}

// docker-compose.yml is the production topology and every part of it is
// something the binary and the images have: each auditrail command, flag
// and AUDITRAIL_ variable exists in the binary; every long-running service
// has a healthcheck and waits on healthy dependencies; every volume is
// declared and every file mounted from the repository exists; two of each
// role, each tool runner with its own outbox volume; ClickHouse with
// Keeper, two replicas and a password; Prometheus scraping every role's
// metrics listener; Grafana with the dashboard; one gateway publishing the
// APIs. `docker compose config` checks it too where Docker is installed.
func TestComposeTopology(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	if _, err := os.Stat("../../.dockerignore"); err != nil {
		t.Error("no .dockerignore")
	}
	helps := map[string][2]map[string]bool{}
	for name, s := range doc.Services {
		auditrail := s.Image == "auditrail:latest"
		if auditrail {
			args := s.Command
			if len(s.Entrypoint) > 1 {
				args = append(s.Entrypoint[1:], args...)
			}
			if len(args) == 0 {
				t.Errorf("%s: no auditrail command", name)
				continue
			}
			cmd := args[0]
			h, ok := helps[cmd]
			if !ok {
				f, e := helpOf(t, cmd)
				h = [2]map[string]bool{f, e}
				helps[cmd] = h
			}
			for _, a := range args[1:] {
				if f, ok := strings.CutPrefix(a, "--"); ok && !h[0][f] {
					t.Errorf("%s: auditrail %s has no flag --%s", name, cmd, f)
				}
			}
			for k := range s.Environment {
				if strings.HasPrefix(k, "AUDITRAIL_") && !h[1][k] {
					t.Errorf("%s: auditrail %s reads no %s", name, cmd, k)
				}
			}
			if hc := s.Healthcheck; hc != nil && (len(hc.Test) < 4 || hc.Test[1] != "/usr/local/bin/auditrail" || hc.Test[2] != "healthcheck") {
				t.Errorf("%s: healthcheck %v is not `auditrail healthcheck` (the image has no shell)", name, hc.Test)
			}
		}
		oneShot := s.Restart == "no"
		if !oneShot && s.Healthcheck == nil {
			t.Errorf("%s has no healthcheck", name)
		}
		for dep, c := range s.DependsOn {
			d, ok := doc.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which does not exist", name, dep)
			case d.Restart == "no" && c.Condition != "service_completed_successfully":
				t.Errorf("%s waits on the one-shot %s with %q", name, dep, c.Condition)
			case d.Restart != "no" && c.Condition != "service_healthy":
				t.Errorf("%s waits on %s with %q, not service_healthy", name, dep, c.Condition)
			}
		}
		for _, v := range s.Volumes {
			src := strings.SplitN(v, ":", 2)[0]
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("../..", src)); err != nil {
					t.Errorf("%s mounts %s, which is not in the repository", name, src)
				}
			} else if _, ok := doc.Volumes[src]; !ok {
				t.Errorf("%s mounts the undeclared volume %s", name, src)
			}
		}
		if len(s.Ports) > 0 && name != "gateway" && name != "grafana" {
			t.Errorf("%s publishes %v: only the gateway (and Grafana) should", name, s.Ports)
		}
	}
	roles := roleServices(doc)
	outboxes := map[string]bool{}
	for _, svc := range roles["toolrunner"] {
		s := doc.Services[svc]
		i := slices.Index(s.Command, "--outbox")
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("%s keeps its outbox on the container's disk", svc)
			continue
		}
		for _, v := range s.Volumes {
			if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == s.Command[i+1] {
				if outboxes[parts[0]] {
					t.Errorf("%s shares the outbox volume %s", svc, parts[0])
				}
				outboxes[parts[0]] = true
			}
		}
	}
	if len(outboxes) != len(roles["toolrunner"]) {
		t.Errorf("outbox volumes %v for %d tool runners", outboxes, len(roles["toolrunner"]))
	}
	// Prometheus scrapes every role instance on its metrics listener.
	prom, err := os.ReadFile("../../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for role, svcs := range roles {
		for _, svc := range svcs {
			addr := doc.Services[svc].Environment["AUDITRAIL_METRICS"]
			_, port, _ := strings.Cut(addr, ":")
			if addr == "" || !strings.Contains(string(prom), svc+":"+port) {
				t.Errorf("%s (%s): metrics on %q not scraped by prometheus.yml", svc, role, addr)
			}
		}
	}
	chReplicas := 0
	for name, s := range doc.Services {
		if strings.HasPrefix(name, "clickhouse-") && strings.HasPrefix(s.Image, "clickhouse/clickhouse-server") {
			chReplicas++
			if s.Environment["CLICKHOUSE_PASSWORD"] == "" || s.Environment["CLICKHOUSE_USER"] == "" || s.Environment["CLICKHOUSE_REPLICA"] != name {
				t.Errorf("%s: user, password or replica macro missing: %v", name, s.Environment)
			}
		}
	}
	if chReplicas != 2 || doc.Services["keeper"].Image == "" || doc.Services["grafana"].Image == "" || doc.Services["prometheus"].Image == "" {
		t.Errorf("%d ClickHouse replicas, keeper %q, grafana %q, prometheus %q", chReplicas, doc.Services["keeper"].Image, doc.Services["grafana"].Image, doc.Services["prometheus"].Image)
	}
	gw := doc.Services["gateway"]
	for _, role := range []string{"query", "toolrunner", "controlplane"} {
		i := slices.Index(gw.Command, "--"+role)
		if i < 0 || strings.Count(gw.Command[i+1], "http://") != len(roles[role]) {
			t.Errorf("the gateway does not route to every %s instance: %v", role, gw.Command)
		}
	}
	// Docker's compose plugin, where installed (the docker client here has none).
	if docker, err := exec.LookPath("docker"); err == nil && exec.Command(docker, "compose", "version").Run() == nil {
		cmd := exec.Command(docker, "compose", "-f", "../../docker-compose.yml", "config", "-q")
		cmd.Env = append(os.Environ(), "AUDITRAIL_BOOTSTRAP_KEY=k", "AUDITRAIL_CURSOR_KEYS=k", "AUDITRAIL_SECRETS_KEYS=k", "AUDITRAIL_PAGE_TOKEN_KEYS=k",
			"AUDITRAIL_CLICKHOUSE_PASSWORD=k", "AUDITRAIL_CLICKHOUSE_INGEST_PASSWORD=k", "AUDITRAIL_CLICKHOUSE_QUERY_PASSWORD=k",
			"AUDITRAIL_CLICKHOUSE_TLOG_PASSWORD=k", "GRAFANA_ADMIN_PASSWORD=k")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker compose config: %v\n%s", err, out)
		}
	}
}
