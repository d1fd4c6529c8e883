package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"

	"github.com/auditrail/auditrail/internal/natsx"
)

// docker-compose.yml parses, every auditrail role connects to NATS with its
// own credentials, and the nats service loads the include that
// `auditrail nats-setup` (as the compose file runs it) writes: a server
// started from that include accepts each role's credentials and refuses
// an anonymous client. (Docker itself cannot run here.)
func TestComposeNATSAuth(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Entrypoint  []string          `yaml:"entrypoint"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	want := map[string]string{"ingest": "ingest", "query": "query", "controlplane": "controlplane", "toolrunner": "toolrunner", "deliver": "deliver", "emit": "admin"}
	for svc, role := range want {
		s, ok := doc.Services[svc]
		if !ok {
			t.Errorf("no %s service", svc)
			continue
		}
		if got := s.Environment["AUDITRAIL_NATS_CREDS"]; got != "/nats-auth/"+role+".creds" {
			t.Errorf("%s: AUDITRAIL_NATS_CREDS %q, want the %s credentials", svc, got, role)
		}
		if !strings.Contains(strings.Join(s.Volumes, " "), "nats-auth:/nats-auth:ro") {
			t.Errorf("%s does not mount nats-auth read-only: %v", svc, s.Volumes)
		}
		if s.Environment["AUDITRAIL_NATS_URL"] == "" {
			t.Errorf("%s: no AUDITRAIL_NATS_URL (the env anchor was not merged)", svc)
		}
	}
	ns := doc.Services["nats"]
	if strings.Join(ns.Command[:2], " ") != "-c /nats-auth/auth.conf" {
		t.Fatalf("nats command %v does not load the include", ns.Command)
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
		if svc != "nats-setup" && svc != "controlplane" && strings.Contains(strings.Join(s.Volumes, " "), "nats-stream") {
			t.Errorf("%s mounts the stream credentials' key", svc)
		}
	}
	if cp := doc.Services["controlplane"]; !strings.Contains(strings.Join(cp.Volumes, " "), "nats-stream:/nats-stream:ro") ||
		cp.Environment["AUDITRAIL_NATS_STREAM_KEY_FILE"] != "/nats-stream/siem.nk" {
		t.Errorf("controlplane lacks the stream credentials' key: %v %v", cp.Volumes, cp.Environment)
	}

	// Run the setup command with the volumes mapped to temp dirs.
	dir := t.TempDir()
	args := make([]string, len(setup.Command))
	for i, a := range setup.Command {
		a = strings.ReplaceAll(a, "/nats-auth", filepath.Join(dir, "auth"))
		a = strings.ReplaceAll(a, "/nats-stream", filepath.Join(dir, "stream"))
		args[i] = strings.ReplaceAll(a, "/nats-keys", filepath.Join(dir, "keys"))
	}
	if out, err := exec.Command(binary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("nats-setup: %v\n%s", err, out)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "auth", natsx.ServerConfFile))
	if err != nil {
		t.Fatalf("the include does not load: %v", err)
	}
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
	if nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("anonymous connection accepted")
	}
	for _, role := range natsx.Roles {
		copts, err := natsx.CredsOptions(filepath.Join(dir, "auth", role+".creds"))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), copts...)
		if err != nil {
			t.Fatalf("%s credentials refused: %v", role, err)
		}
		nc.Close()
	}
	// A stream credential signed with the key the control plane gets
	// connects to the server of the include (account AUDITRAIL_SIEM).
	signer, err := natsx.LoadStreamSigner(filepath.Join(dir, "stream", "siem.nk"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "1a000000-0000-4000-8000-00000000001a"
	creds, _, err := signer.Issue("0a000000-0000-4000-8000-00000000000a", id, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	credsPath := filepath.Join(dir, "siem.creds")
	if err := os.WriteFile(credsPath, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(credsPath), nats.CustomInboxPrefix(natsx.StreamInboxPrefix(id)))
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
}
