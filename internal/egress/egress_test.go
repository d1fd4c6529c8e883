package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want Class
	}{
		{"93.184.216.34", Public},
		{"8.8.8.8", Public},
		{"2606:4700:4700::1111", Public},
		{"127.0.0.1", Loopback},
		{"127.255.255.254", Loopback},
		{"::1", Loopback},
		{"::ffff:127.0.0.1", Loopback},
		{"64:ff9b::127.0.0.1", Loopback},
		{"10.0.0.1", Private},
		{"172.16.0.1", Private},
		{"172.31.255.255", Private},
		{"192.168.1.1", Private},
		{"::ffff:10.0.0.1", Private},
		{"::ffff:192.168.0.1", Private},
		{"fc00::1", Private},
		{"fd12:3456::1", Private},
		{"fec0::1", Private},
		{"64:ff9b:1::a00:1", Private},
		{"169.254.169.254", LinkLocal},
		{"::ffff:169.254.169.254", LinkLocal},
		{"64:ff9b::169.254.169.254", LinkLocal},
		{"fe80::1", LinkLocal},
		{"fe80::1%eth0", LinkLocal},
		{"100.64.0.1", Shared},
		{"100.127.255.255", Shared},
		{"::ffff:100.64.0.1", Shared},
		{"224.0.0.1", Multicast},
		{"239.255.255.250", Multicast},
		{"ff02::1", Multicast},
		{"ff0e::1", Multicast},
		{"0.0.0.0", Unspecified},
		{"0.1.2.3", Unspecified},
		{"::", Unspecified},
		{"::ffff:0.0.0.0", Unspecified},
		{"255.255.255.255", Reserved},
		{"240.0.0.1", Reserved},
		{"::127.0.0.1", Reserved},
		// Neighbours of the ranges stay public.
		{"100.63.255.255", Public},
		{"100.128.0.0", Public},
		{"172.15.255.255", Public},
		{"172.32.0.0", Public},
		{"169.253.255.255", Public},
		{"11.0.0.1", Public},
		{"64:ff9b::808:808", Public},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := Classify(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("Classify(%s) = %s, want %s", tc.addr, got, tc.want)
			}
		})
	}
}

func TestModes(t *testing.T) {
	dev, err := New(Config{Mode: ModeDev}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	all, err := New(Config{Mode: ModeAllowPrivate}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Mode: "open"}, quiet); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad mode: %v", err)
	}
	tests := []struct {
		addr                string
		strict, dev, allowd bool
	}{
		{"93.184.216.34", true, true, true},
		{"127.0.0.1", false, true, true},
		{"::ffff:127.0.0.1", false, true, true},
		{"::1", false, true, true},
		{"10.0.0.1", false, false, true},
		{"169.254.169.254", false, false, true},
		{"100.64.0.1", false, false, true},
		{"0.0.0.0", false, false, true},
		{"fe80::1", false, false, true},
	}
	for _, tc := range tests {
		ip := netip.MustParseAddr(tc.addr)
		for _, m := range []struct {
			g    *Guard
			want bool
		}{{Strict(), tc.strict}, {dev, tc.dev}, {all, tc.allowd}} {
			err := m.g.CheckAddr(ip)
			if (err == nil) != m.want {
				t.Errorf("%s mode %s: %v, want allowed %v", tc.addr, m.g.Mode(), err, m.want)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("%s: %v does not wrap ErrRefused", tc.addr, err)
			}
		}
	}
}

// FuzzClassify: every mapped or NAT64 spelling of an IPv4 address has its
// class, and the guard refuses exactly the non-public classes.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "169.254.169.254", "8.8.8.8", "100.64.1.1", "224.1.1.1", "0.0.0.0"} {
		a := netip.MustParseAddr(s).As4()
		f.Add(a[0], a[1], a[2], a[3])
	}
	f.Fuzz(func(t *testing.T, a, b, c, d byte) {
		v4 := netip.AddrFrom4([4]byte{a, b, c, d})
		want := Classify(v4)
		mapped := netip.AddrFrom16(v4.As16())
		n := [16]byte{0, 0x64, 0xff, 0x9b, 12: a, 13: b, 14: c, 15: d}
		for _, alt := range []netip.Addr{mapped, netip.AddrFrom16(n)} {
			if got := Classify(alt); got != want {
				t.Fatalf("%s is %s but %s is %s", v4, want, alt, got)
			}
		}
		_, ok := Strict().Allowed(mapped)
		if ok != (want == Public) {
			t.Fatalf("strict guard on %s (%s): allowed %v", mapped, want, ok)
		}
		ip := net.IP(v4.AsSlice())
		if (ip.IsLoopback() && want != Loopback) || (ip.IsPrivate() && want != Private) || (ip.IsLinkLocalUnicast() && want != LinkLocal) ||
			(ip.IsMulticast() && want != Multicast) {
			t.Fatalf("%s: net.IP disagrees with class %s", v4, want)
		}
	})
}

// fakeResolver answers from a function, so that a test can change its
// answer between configuration and dial (DNS rebinding).
type fakeResolver struct {
	answer func(host string) []netip.Addr
	srv    []*net.SRV
}

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a := r.answer(strings.TrimSuffix(host, "."))
	if len(a) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r fakeResolver) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	if r.srv == nil {
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return "", r.srv, nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestCheckURL(t *testing.T) {
	res := fakeResolver{answer: func(host string) []netip.Addr {
		switch host {
		case "hooks.example.com":
			return addrs("93.184.216.34")
		case "sneaky.example.com":
			return addrs("93.184.216.34", "127.0.0.1")
		case "metadata.example.com":
			return addrs("169.254.169.254")
		}
		return nil
	}}
	g, err := New(Config{Mode: ModeStrict, Resolver: res}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		want error // nil, ErrRefused or ErrUnresolved
	}{
		{"https://hooks.example.com/x", nil},
		{"https://93.184.216.34:8443", nil},
		{"http://127.0.0.1:4222", ErrRefused},
		{"http://169.254.169.254/latest/meta-data/", ErrRefused},
		{"http://10.0.0.1", ErrRefused},
		{"http://[::ffff:127.0.0.1]:4222", ErrRefused},
		{"http://[::1]/", ErrRefused},
		{"http://0.0.0.0:4222", ErrRefused},
		{"http://[fe80::1%25eth0]/", ErrRefused},
		{"http://sneaky.example.com", ErrRefused},
		{"http://metadata.example.com", ErrRefused},
		{"http://nowhere.example.com", ErrUnresolved},
		{"http://127.1:4222", ErrRefused},
		{"http://2130706433/", ErrRefused},
		{"http://0x7f000001/", ErrRefused},
		{"http://0x7f.0.0.1/", ErrRefused},
		{"http://017700000001/", ErrRefused},
		{"http://hooks.example.com.", nil},
		{"not a url", ErrRefused},
	}
	for _, tc := range tests {
		err := g.CheckURL(context.Background(), tc.url)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", tc.url, err, tc.want)
		}
	}
	// The system resolver: localhost is loopback.
	if err := Strict().CheckURL(context.Background(), "http://localhost:4222"); !errors.Is(err, ErrRefused) {
		t.Errorf("localhost: %v", err)
	}
	if err := AllowLoopback().CheckURL(context.Background(), "http://localhost:4222"); err != nil {
		t.Errorf("localhost in dev: %v", err)
	}
	// SRV targets are what a client dials.
	srv := fakeResolver{answer: res.answer, srv: []*net.SRV{{Target: "hooks.example.com.", Port: 27017}, {Target: "metadata.example.com.", Port: 27017}}}
	gs, _ := New(Config{Mode: ModeStrict, Resolver: srv}, quiet)
	if err := gs.CheckSRV(context.Background(), "mongodb", "tcp", "cluster.example.com"); !errors.Is(err, ErrRefused) {
		t.Errorf("SRV to metadata: %v", err)
	}
	srv.srv = srv.srv[:1]
	gs, _ = New(Config{Mode: ModeStrict, Resolver: srv}, quiet)
	if err := gs.CheckSRV(context.Background(), "mongodb", "tcp", "cluster.example.com"); err != nil {
		t.Errorf("SRV to a public host: %v", err)
	}
}

func TestDialerRefusesAtConnect(t *testing.T) {
	l, accepted := testenv.CountingListener(t)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ctx := context.Background()

	// A literal loopback address: refused in strict mode, allowed in dev.
	if _, err := Strict().Dialer(net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", l.Addr().String()); !errors.Is(err, ErrRefused) {
		t.Fatalf("strict dial to %s: %v", l.Addr(), err)
	}
	c, err := AllowLoopback().Dialer(net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dev dial: %v", err)
	}
	c.Close()

	// DNS rebinding: public when configured, loopback when dialled.
	var rebound atomic.Bool
	res := fakeResolver{answer: func(string) []netip.Addr {
		if rebound.Load() {
			return addrs("127.0.0.1")
		}
		return addrs("93.184.216.34")
	}}
	g, _ := New(Config{Mode: ModeStrict, Resolver: res}, quiet)
	if err := g.CheckURL(ctx, "http://rebind.example.com:"+port); err != nil {
		t.Fatalf("configure-time check: %v", err)
	}
	rebound.Store(true)
	if _, err := g.Dialer(net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", "rebind.example.com:"+port); !errors.Is(err, ErrRefused) {
		t.Fatalf("rebound dial: %v", err)
	}
	// The system resolver path: localhost resolves to loopback.
	if _, err := Strict().Dialer(net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", "localhost:"+port); !errors.Is(err, ErrRefused) {
		t.Fatalf("localhost dial: %v", err)
	}
	// Unix sockets are local: refused unless loopback is allowed.
	if err := Strict().Control("unix", "/tmp/mongodb-27017.sock", nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("unix socket: %v", err)
	}
	if err := AllowLoopback().Control("unix", "/tmp/mongodb-27017.sock", nil); err != nil {
		t.Fatalf("unix socket in dev: %v", err)
	}
	if n := accepted.Settled(t); n != 1 {
		t.Fatalf("%d connections reached the listener, want 1 (the dev dial)", n)
	}
}

// TestTransport: an HTTP client over a guard's transport cannot reach a
// loopback server in strict mode, can with AllowLoopback, and ignores a
// proxy from the environment (the guard must see the real destination).
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	strict := &http.Client{Transport: Strict().Transport(time.Second)}
	defer strict.CloseIdleConnections()
	if _, err := strict.Get(srv.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("strict transport reached loopback: %v", err)
	}
	tr := AllowLoopback().Transport(time.Second)
	if tr.Proxy != nil {
		t.Fatal("the transport uses a proxy")
	}
	dev := &http.Client{Transport: tr}
	defer dev.CloseIdleConnections()
	resp, err := dev.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
