package chserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoZooKeeper is returned when Debian's zookeeper (or java) is missing.
var ErrNoZooKeeper = errors.New("zookeeper not found (apt-get install zookeeper)")

// zooKeeperJar is where Debian's zookeeper package puts the server.
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeper is a throwaway single-node ZooKeeper (Debian's package, run
// directly: its scripts hard-code paths under /etc and /var).
type ZooKeeper struct {
	Dir  string
	Port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// ZooKeeperInstalled reports whether a ZooKeeper can be started here.
func ZooKeeperInstalled() error {
	if _, err := exec.LookPath("java"); err != nil {
		return ErrNoZooKeeper
	}
	if _, err := os.Stat(zooKeeperJar); err != nil {
		return ErrNoZooKeeper
	}
	return nil
}

// StartZooKeeper starts a ZooKeeper with its data under dir on a free port
// and waits until it serves (srvr names its mode: ruok answers imok before
// the server takes sessions, and a ClickHouse 18.16 whose first session is
// refused can crash in its DDL worker). A throwaway: it does not fsync its
// transaction log (forceSync=no), which a production ZooKeeper or Keeper
// must.
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	if err := ZooKeeperInstalled(); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nforceSync=no\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n", filepath.Join(dir, "data"), port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command("java", "-Xmx256m", "-cp", "/etc/zookeeper/conf:"+zooKeeperJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	z := &ZooKeeper{Dir: dir, Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(z.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-z.done:
			log, _ := os.ReadFile(filepath.Join(dir, "zookeeper.log"))
			return nil, fmt.Errorf("zookeeper exited at start: %s", tail(log, 2000))
		default:
		}
		if z.serving() {
			return z, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	z.Stop()
	return nil, errors.New("zookeeper did not answer within 60s")
}

func (z *ZooKeeper) serving() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", z.Port), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(c, 4096))
	return strings.Contains(string(b), "Mode: standalone")
}

// PID is the ZooKeeper process's id (0 once stopped): a benchmark reads
// its CPU time from /proc.
func (z *ZooKeeper) PID() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.cmd == nil {
		return 0
	}
	return z.cmd.Process.Pid
}

// Stop kills ZooKeeper and waits for it to go.
func (z *ZooKeeper) Stop() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.cmd == nil {
		return
	}
	_ = syscall.Kill(-z.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-z.done:
	case <-time.After(10 * time.Second):
	}
	z.cmd = nil
}
