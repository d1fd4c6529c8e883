package chserver_test

import (
	"net"
	"testing"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
)

// A start that finds a port taken by a process that never asked FreePort
// (the race the reservations cannot close) starts again on other ports.
func TestStartRetriesATakenPort(t *testing.T) {
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	taken := squatter.Addr().(*net.TCPAddr).Port
	calls := 0
	restore := chserver.SetPickPorts(func(real func() ([]int, error)) ([]int, error) {
		calls++
		ports, err := real()
		if calls == 1 && err == nil {
			ports[0] = taken // the first start meets a taken port
		}
		return ports, err
	})
	defer restore()
	s, err := chserver.StartWith(t.TempDir(), chserver.Options{})
	if err != nil {
		t.Fatalf("a start on a taken port was not tried again: %v", err)
	}
	defer s.Stop()
	if calls != 2 || s.TCPPort == taken {
		t.Errorf("%d port picks, tcp port %d (taken: %d); want a second pick on other ports", calls, s.TCPPort, taken)
	}
}
