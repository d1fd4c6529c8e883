package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// EnvClickHouseDSN names a ClickHouse to use instead of starting one.
const EnvClickHouseDSN = "AUDITRAIL_TEST_CLICKHOUSE_DSN"

// ErrNoClickHouse is returned when no clickhouse-server binary is installed.
var ErrNoClickHouse = errors.New("clickhouse-server not found (apt-get install clickhouse-server)")

// ClickHouseServer is a throwaway ClickHouse server process.
type ClickHouseServer struct {
	Dir      string
	TCPPort  int
	HTTPPort int
	bin      string

	mu  sync.Mutex
	cmd *exec.Cmd
}

const chConfig = `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{{dir}}/log/server.log</log><errorlog>{{dir}}/log/error.log</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{tcp}}</tcp_port>
  <http_port>{{http}}</http_port>
  <path>{{dir}}/data/</path>
  <tmp_path>{{dir}}/tmp/</tmp_path>
  <user_files_path>{{dir}}/user_files/</user_files_path>
  <format_schema_path>{{dir}}/format_schemas/</format_schema_path>
  <users_config>/etc/clickhouse-server/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`

// ClickHouseBinary finds clickhouse-server.
func ClickHouseBinary() (string, error) {
	for _, name := range []string{"clickhouse-server", "/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoClickHouse
}

// StartClickHouse starts a server with its data under dir on two free ports
// and waits until it answers.
func StartClickHouse(dir string) (*ClickHouseServer, error) {
	bin, err := ClickHouseBinary()
	if err != nil {
		return nil, err
	}
	tcp, err := FreePort()
	if err != nil {
		return nil, err
	}
	httpPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &ClickHouseServer{Dir: dir, TCPPort: tcp, HTTPPort: httpPort, bin: bin}
	for _, sub := range []string{"log", "data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	cfg := strings.NewReplacer("{{dir}}", dir, "{{tcp}}", fmt.Sprint(tcp), "{{http}}", fmt.Sprint(httpPort)).Replace(chConfig)
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start (re)starts the process on the same directory and ports.
func (s *ClickHouseServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("clickhouse already running")
	}
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.Dir, "config.xml"))
	cmd.Dir = s.Dir
	out, err := os.OpenFile(filepath.Join(s.Dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	// The server dies with the process that started it, even on a crash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start clickhouse: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.Dir, "log", "error.log"))
			return fmt.Errorf("clickhouse exited at start: %v: %s", err, tail(log, 2000))
		default:
		}
		if s.ping() {
			go func() { <-exited }()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	s.cmd = nil
	return errors.New("clickhouse did not answer within 60s")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (s *ClickHouseServer) ping() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/ping", s.HTTPPort))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 200 && strings.HasPrefix(string(b), "Ok")
}

// Kill stops the server abruptly (SIGKILL), as a crash or outage would.
func (s *ClickHouseServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	for i := 0; i < 100 && s.alive(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	s.cmd = nil
}

func (s *ClickHouseServer) alive() bool {
	return syscall.Kill(s.cmd.Process.Pid, 0) == nil && !s.exited()
}

func (s *ClickHouseServer) exited() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

// Stop stops the server and waits for it to go.
func (s *ClickHouseServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	for i := 0; i < 200 && s.alive(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if s.alive() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	s.cmd = nil
}

// DSN returns the native-protocol DSN of database db.
func (s *ClickHouseServer) DSN(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", s.TCPPort, db)
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var shared struct {
	once sync.Once
	srv  *ClickHouseServer
	dir  string
	err  error
}

func stopShared() {
	if shared.srv != nil {
		shared.srv.Stop()
		_ = os.RemoveAll(shared.dir)
	}
}

// ClickHouse returns the DSN of a fresh, empty database on a ClickHouse
// server: the one named by AUDITRAIL_TEST_CLICKHOUSE_DSN, or one started for
// this test binary (use Main in TestMain to stop it at the end).
func ClickHouse(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvClickHouseDSN)
	if base == "" {
		shared.once.Do(func() {
			shared.dir, shared.err = os.MkdirTemp("", "auditrail-clickhouse-")
			if shared.err == nil {
				shared.srv, shared.err = StartClickHouse(shared.dir)
			}
		})
		if shared.err != nil {
			Missing(t, "no ClickHouse: %v", shared.err)
		}
		base = shared.srv.DSN("default")
	}
	return freshDatabase(t, base)
}

// ClickHouseDedicated starts a ClickHouse server for this test alone (for
// tests that stop and restart it) and returns it with the DSN of a fresh database.
func ClickHouseDedicated(t testing.TB) (*ClickHouseServer, string) {
	t.Helper()
	if _, err := ClickHouseBinary(); err != nil {
		Missing(t, "%v", err)
	}
	dir, err := os.MkdirTemp("", "auditrail-clickhouse-")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartClickHouse(dir)
	if err != nil {
		t.Fatalf("start clickhouse: %v", err)
	}
	t.Cleanup(func() {
		srv.Stop()
		_ = os.RemoveAll(dir)
	})
	return srv, freshDatabase(t, srv.DSN("default"))
}

func freshDatabase(t testing.TB, base string) string {
	t.Helper()
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "test_" + hex.EncodeToString(b[:])
	opts.Auth.Database = "default"
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		Missing(t, "clickhouse at %s: %v", base, err)
	}
	t.Cleanup(func() {
		c, err := clickhouse.Open(opts)
		if err != nil {
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
	})
	opts.Auth.Database = db
	return fmt.Sprintf("clickhouse://%s/%s", opts.Addr[0], db)
}
