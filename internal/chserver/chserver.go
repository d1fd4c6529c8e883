// Package chserver runs a throwaway ClickHouse server from the machine's
// clickhouse-server binary, in a directory of its own on free ports: for
// tests (through testenv) and for `auditrail-bench`.
package chserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled is returned when no clickhouse-server binary is installed.
var ErrNotInstalled = errors.New("clickhouse-server not found (apt-get install clickhouse-server)")

// Server is a throwaway ClickHouse server process.
type Server struct {
	Dir      string
	TCPPort  int
	HTTPPort int
	bin      string

	// usersXML, when set, is the server's users configuration (else the
	// machine's /etc/clickhouse-server/users.xml).
	usersXML string
	// usersD are files merged into the users configuration (users.d/).
	usersD map[string][]byte
	// env is added to the process's environment.
	env []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

const configTemplate = `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{{dir}}/log/server.log</log><errorlog>{{dir}}/log/error.log</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{tcp}}</tcp_port>
  <http_port>{{http}}</http_port>
  <path>{{dir}}/data/</path>
  <tmp_path>{{dir}}/tmp/</tmp_path>
  <user_files_path>{{dir}}/user_files/</user_files_path>
  <format_schema_path>{{dir}}/format_schemas/</format_schema_path>
  <users_config>{{users}}</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>
{{extra}}</yandex>
`

// ClickHouseBinary finds clickhouse-server.
func Binary() (string, error) {
	for _, name := range []string{"clickhouse-server", "/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// StartClickHouse starts a server with its data under dir on two free ports
// and waits until it answers.
func Start(dir string) (*Server, error) { return StartWith(dir, Options{}) }

// Options configure a throwaway server beyond its directory and ports.
type Options struct {
	// UsersXML is the users configuration (default: the machine's
	// /etc/clickhouse-server/users.xml, copied into the directory when
	// UsersD is set, so that users.d sits beside it).
	UsersXML string
	// UsersD are users files merged into it, as a deployment mounts them
	// into /etc/clickhouse-server/users.d/: name → content.
	UsersD map[string][]byte
	// Env is added to the server's environment (what the configuration
	// reads with from_env).
	Env []string
	// PartLog: the server logs every part it writes, merges and removes
	// (system.part_log, flushed every second): what its merges cost, by
	// table. A cost of its own, for measurements.
	PartLog bool
}

// partLog configures system.part_log.
const partLog = "  <part_log><database>system</database><table>part_log</table><flush_interval_milliseconds>1000</flush_interval_milliseconds></part_log>\n"

// StartWith is Start with options.
//
// The ports are reserved among the callers of FreePort, but any other
// process may still bind one of them meanwhile (an ephemeral port of a
// client, a server on port 0): a start that finds a port taken is tried
// again on new ports, a few times.
func StartWith(dir string, o Options) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startWith(dir, o)
		if err == nil || attempt == portAttempts || !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
}

// portAttempts bounds the starts of StartWith that find a port taken.
const portAttempts = 4

// errPortTaken: the server exited at start because a port was taken.
var errPortTaken = errors.New("a port was taken")

// pickPorts gives a server its two ports (a test replaces it).
var pickPorts = func() ([]int, error) { return freePorts(2) }

func startWith(dir string, o Options) (*Server, error) {
	ports, err := pickPorts()
	if err != nil {
		return nil, err
	}
	s, err := newServer(dir, ports[0], ports[1])
	if err != nil {
		return nil, err
	}
	s.usersXML, s.usersD, s.env = o.UsersXML, o.UsersD, o.Env
	if s.usersXML == "" && len(s.usersD) > 0 {
		b, err := os.ReadFile("/etc/clickhouse-server/users.xml")
		if err != nil {
			return nil, fmt.Errorf("users.xml to merge users.d into: %w", err)
		}
		s.usersXML = string(b)
	}
	extra := ""
	if o.PartLog {
		extra = partLog
	}
	if err := s.writeConfig(extra); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// newServer describes a server under dir on the given ports; nothing is started.
func newServer(dir string, tcp, httpPort int) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return &Server{Dir: dir, TCPPort: tcp, HTTPPort: httpPort, bin: bin}, nil
}

// writeConfig writes the server's directories and config.xml, with extra
// (XML elements of <yandex>) added.
func (s *Server) writeConfig(extra string) error {
	for _, sub := range []string{"log", "data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, sub), 0o755); err != nil {
			return err
		}
	}
	users := "/etc/clickhouse-server/users.xml"
	if s.usersXML != "" {
		users = filepath.Join(s.Dir, "users.xml")
		if err := os.WriteFile(users, []byte(s.usersXML), 0o644); err != nil {
			return err
		}
		if len(s.usersD) > 0 {
			if err := os.MkdirAll(filepath.Join(s.Dir, "users.d"), 0o755); err != nil {
				return err
			}
		}
		for name, b := range s.usersD {
			if err := os.WriteFile(filepath.Join(s.Dir, "users.d", filepath.Base(name)), b, 0o644); err != nil {
				return err
			}
		}
	}
	cfg := strings.NewReplacer("{{dir}}", s.Dir, "{{tcp}}", fmt.Sprint(s.TCPPort), "{{http}}", fmt.Sprint(s.HTTPPort), "{{extra}}", extra,
		"{{users}}", users).Replace(configTemplate)
	return os.WriteFile(filepath.Join(s.Dir, "config.xml"), []byte(cfg), 0o644)
}

// Start (re)starts the process on the same directory and ports.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("clickhouse already running")
	}
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.Dir, "config.xml"))
	cmd.Dir = s.Dir
	if len(s.env) > 0 {
		cmd.Env = append(os.Environ(), s.env...)
	}
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
			if bytes.Contains(log, []byte("Address already in use")) {
				err = fmt.Errorf("%w: %v", errPortTaken, err)
			}
			return fmt.Errorf("clickhouse exited at start: %w: %s", err, tail(log, 2000))
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

func (s *Server) ping() bool {
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
func (s *Server) Kill() {
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

func (s *Server) alive() bool {
	return syscall.Kill(s.cmd.Process.Pid, 0) == nil && !s.exited()
}

func (s *Server) exited() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	return err != nil || strings.Contains(string(b), ") Z ")
}

// Stop stops the server and waits for it to go.
func (s *Server) Stop() {
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
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", s.TCPPort, db)
}

// freePorts returns n distinct TCP ports that were free a moment ago and
// that no other caller of FreePort, in this process or another, has been
// given: a port the kernel hands out is closed again before its server
// binds it, and two test processes starting servers at once were given the
// same one. Each port given is reserved by a lock on a file under
// os.TempDir()/auditrail-ports, held until this process exits (the kernel
// releases it then, even on a crash).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := reservePort()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// FreePort returns a TCP port that was free a moment ago and that no other
// caller has been given (see freePorts).
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// reserved holds the lock files of the ports this process was given.
var reserved struct {
	sync.Mutex
	files []*os.File
}

func reservePort() (int, error) {
	return reserveFrom(func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
}

// reserveFrom takes ports from listen until one is not reserved, holding
// the rejected listeners meanwhile so that the kernel offers other ports.
func reserveFrom(listen func() (net.Listener, error)) (int, error) {
	dir := filepath.Join(os.TempDir(), "auditrail-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("port reservations: %w", err)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 100 {
		l, err := listen()
		if err != nil {
			return 0, err
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, fmt.Errorf("port reservations: %w", err)
		}
		// Another open file description (this process or another) holds
		// the lock: that caller was given this port; take another.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		reserved.Lock()
		reserved.files = append(reserved.files, f)
		reserved.Unlock()
		return port, nil
	}
	return 0, errors.New("no free port that is not reserved after 100 tries")
}
