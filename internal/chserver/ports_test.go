package chserver

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A port another process was given (its lock file held) is never given
// again: the next one the kernel offers is taken instead.
func TestReservedPortIsSkipped(t *testing.T) {
	// A port whose lock no running test holds (another test process may
	// hold the one the kernel offers: then the next).
	var taken int
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("20 ports offered by the kernel were each reserved by a running test")
		}
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		taken = first.Addr().(*net.TCPAddr).Port
		first.Close()
		dir := filepath.Join(os.TempDir(), "auditrail-ports")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		other, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(taken)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			defer other.Close()
			break
		}
		other.Close()
	}
	// The kernel offers the taken port first (as it did to two test
	// processes starting clusters at once), then any.
	offers := 0
	got, err := reserveFrom(func() (net.Listener, error) {
		offers++
		if offers == 1 {
			return net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(taken))
		}
		return net.Listen("tcp", "127.0.0.1:0")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got == taken || offers != 2 {
		t.Fatalf("got port %d after %d offers; %d was reserved by another caller", got, offers, taken)
	}
}

// Ports given within one process are distinct while held.
func TestFreePortsDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
	}
}
