package testenv

import (
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the witness's database, written as witnessctl would
)

// LitewitnessVersion is the torchwood release whose litewitness the tests
// run: a C2SP tlog-witness that nobody here wrote.
const LitewitnessVersion = "v0.6.1"

var (
	lwOnce sync.Once
	lwPath string
	lwErr  error
)

// LitewitnessBinary builds filippo.io/torchwood/cmd/litewitness once per
// machine (go install, into the user cache) and returns its path. Without
// the Go module proxy the test is Missing.
func LitewitnessBinary(t testing.TB) string {
	t.Helper()
	lwOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "auditrail-test", "go", "litewitness@"+LitewitnessVersion)
		lwPath = filepath.Join(dir, "litewitness")
		if _, err := os.Stat(lwPath); err == nil {
			return
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			lwErr = err
			return
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
		if err != nil {
			lwErr = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("go", "install", "filippo.io/torchwood/cmd/litewitness@"+LitewitnessVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			lwErr = fmt.Errorf("go install litewitness@%s: %v\n%s", LitewitnessVersion, err, out)
			return
		}
		if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) && !isDirNotEmpty(err) {
			lwErr = err
		}
	})
	if lwErr != nil {
		Missing(t, "litewitness cannot be built: %v", lwErr)
	}
	return lwPath
}

func isDirNotEmpty(err error) bool { return strings.Contains(err.Error(), "directory not empty") }

// Litewitness is a running litewitness process with its own ssh-agent
// holding its Ed25519 key, its database in a temp directory, on a free
// loopback port. Stop and Start stop and restart it (a witness that is
// down); the database and key stay.
type Litewitness struct {
	t                        testing.TB
	bin, dir, name, sock, fp string
	// URL is its submission prefix; VKey its cosigning key (vkey).
	URL, VKey string
	addr      string

	mu    sync.Mutex
	agent *exec.Cmd
	proc  *exec.Cmd
	logs  *SyncBuffer
}

// StartLitewitness starts a litewitness named name (e.g.
// "witness.example/a"). It is stopped when the test ends.
func StartLitewitness(t testing.TB, name string) *Litewitness {
	t.Helper()
	bin := LitewitnessBinary(t)
	for _, tool := range []string{"ssh-agent", "ssh-keygen", "ssh-add"} {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, "%s is not installed (litewitness keeps its key in an ssh-agent): apt-get install openssh-client", tool)
		}
	}
	dir := t.TempDir()
	w := &Litewitness{t: t, bin: bin, dir: dir, name: name, sock: filepath.Join(dir, "agent.sock"), logs: &SyncBuffer{}}
	key := filepath.Join(dir, "witness_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "litewitness", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub").Output()
	if err != nil {
		t.Fatalf("ssh-keygen -l: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "SHA256:") {
		t.Fatalf("ssh-keygen -l: %q", out)
	}
	w.fp = fields[1]
	w.agent = exec.Command("ssh-agent", "-D", "-a", w.sock)
	w.agent.Stdout, w.agent.Stderr = io.Discard, io.Discard
	if err := w.agent.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { _ = w.agent.Process.Kill(); _ = w.agent.Wait() })
	Eventually(t, 10*time.Second, "the ssh-agent socket", func() bool {
		_, err := os.Stat(w.sock)
		return err == nil
	})
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+w.sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	w.addr = "127.0.0.1:" + strconv.Itoa(port)
	w.URL = "http://" + w.addr
	w.Start()
	t.Cleanup(w.Stop)
	vkeyLine := regexp.MustCompile(`vkey=(\S+)`)
	Eventually(t, 10*time.Second, func() string { return "litewitness's verifier key in its log: " + w.logs.String() }, func() bool {
		m := vkeyLine.FindStringSubmatch(w.logs.String())
		if m != nil {
			w.VKey = strings.Trim(m[1], `"`)
		}
		return m != nil
	})
	return w
}

// Start starts the process (again), and waits until it listens.
func (w *Litewitness) Start() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil {
		return
	}
	cmd := exec.Command(w.bin, "-name", w.name, "-db", filepath.Join(w.dir, "witness.db"), "-ssh-agent", w.sock, "-key", w.fp, "-listen", w.addr)
	cmd.Stdout, cmd.Stderr = w.logs, w.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("litewitness: %v", err)
	}
	w.proc = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", w.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			w.proc = nil
			w.t.Fatalf("litewitness exited: %s", w.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("litewitness does not listen on %s: %s", w.addr, w.logs.String())
		}
	}
}

// Stop stops the process (the witness is down until Start).
func (w *Litewitness) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == nil {
		return
	}
	_ = w.proc.Process.Kill()
	for i := 0; i < 100; i++ { // until the port is free again
		c, err := net.DialTimeout("tcp", w.addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	w.proc = nil
}

// Logs is what the process wrote.
func (w *Litewitness) Logs() string { return w.logs.String() }

func (w *Litewitness) db() *sql.DB {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(w.dir, "witness.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		w.t.Fatal(err)
	}
	return db
}

// AddLog tells the witness about a log (as witnessctl add-log and add-key
// do: the log at size 0, and the log's note verifier key).
func (w *Litewitness) AddLog(origin, logVKey string) {
	w.t.Helper()
	db := w.db()
	defer db.Close()
	empty := sha256.Sum256(nil)
	if _, err := db.Exec("INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)", origin, base64.StdEncoding.EncodeToString(empty[:])); err != nil {
		w.t.Fatalf("witness add-log %s: %v", origin, err)
	}
	w.AddKey(origin, logVKey)
}

// AddKey adds a verifier key of a log the witness knows (a rotation).
func (w *Litewitness) AddKey(origin, logVKey string) {
	w.t.Helper()
	db := w.db()
	defer db.Close()
	if _, err := db.Exec("INSERT INTO key (origin, key) VALUES (?, ?)", origin, logVKey); err != nil {
		w.t.Fatalf("witness add-key %s: %v", origin, err)
	}
}

// Size is the size at which the witness knows the log (-1: unknown log).
func (w *Litewitness) Size(origin string) int64 {
	w.t.Helper()
	db := w.db()
	defer db.Close()
	var n int64
	switch err := db.QueryRow("SELECT tree_size FROM log WHERE origin = ?", origin).Scan(&n); {
	case errors.Is(err, sql.ErrNoRows):
		return -1
	case err != nil:
		w.t.Fatalf("witness size of %s: %v", origin, err)
	}
	return n
}
