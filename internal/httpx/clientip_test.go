package httpx

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// lines splits a test's header value into header lines at "|".
func lines(s string) [][]byte {
	if s == "" {
		return nil
	}
	var out [][]byte
	for _, l := range strings.Split(s, "|") {
		out = append(out, []byte(l))
	}
	return out
}

func TestClientIP(t *testing.T) {
	tp, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1, 2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, peer, xff, want string
	}{
		{"no header", "203.0.113.9", "", "203.0.113.9"},
		{"untrusted peer: header ignored", "203.0.113.9", "1.2.3.4", "203.0.113.9"},
		{"untrusted peer: every line ignored", "203.0.113.9", "1.2.3.4|5.6.7.8", "203.0.113.9"},
		{"trusted proxy", "10.1.2.3", "198.51.100.7", "198.51.100.7"},
		{"left-most is the client's claim", "10.1.2.3", "6.6.6.6, 198.51.100.7", "198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3", "198.51.100.7, 10.9.9.9", "198.51.100.7"},
		{"IPv6 client", "192.0.2.1", "2001:db8::5", "2001:db8::5"},
		{"IPv6 trusted proxy", "2001:db8:ffff::1", "2001:db8::5, 2001:db8:ffff:1::2", "2001:db8::5"},
		{"malformed: the peer", "10.1.2.3", "not-an-ip", "10.1.2.3"},
		{"malformed left of a trusted hop: that hop", "10.1.2.3", "6.6.6.6, garbage, 10.9.9.9", "10.9.9.9"},
		{"malformed left of the client: the client", "10.1.2.3", "garbage, 198.51.100.7", "198.51.100.7"},
		{"all trusted: the left-most", "10.1.2.3", "10.2.2.2, 10.3.3.3", "10.2.2.2"},
		{"all trusted, one hop", "10.1.2.3", "10.2.2.2", "10.2.2.2"},
		{"mapped peer", "::ffff:10.1.2.3", "198.51.100.7", "198.51.100.7"},
		{"mapped client", "10.1.2.3", "::ffff:198.51.100.7", "198.51.100.7"},
		{"port on an entry", "10.1.2.3", "6.6.6.6, 198.51.100.7:4711", "198.51.100.7"},
		{"port on an IPv6 entry", "10.1.2.3", "[2001:db8::5]:443", "2001:db8::5"},
		{"zone dropped", "10.1.2.3", "fe80::1%eth0", "fe80::1"},
		{"empty elements ignored", "10.1.2.3", "6.6.6.6,, 198.51.100.7 ,", "198.51.100.7"},
		// HAProxy (option forwardfor) and others append a line of their own
		// rather than extend the client's: the forged first line must not
		// win over the proxy's.
		{"two lines: the proxy's line wins", "10.1.2.3", "6.6.6.6|198.51.100.7", "198.51.100.7"},
		{"two lines: forged list in the first", "10.1.2.3", "6.6.6.6, 7.7.7.7|198.51.100.7", "198.51.100.7"},
		{"three lines through two proxies", "10.1.2.3", "6.6.6.6|198.51.100.7|10.9.9.9", "198.51.100.7"},
		{"two lines: a forged trusted address in the first", "10.1.2.3", "10.6.6.6|198.51.100.7", "198.51.100.7"},
		{"empty line", "10.1.2.3", "198.51.100.7|", "198.51.100.7"},
		{"malformed line after the client's", "10.1.2.3", "198.51.100.7|garbage", "10.1.2.3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tp.ClientIP(netip.MustParseAddr(tc.peer), lines(tc.xff))
			if got.String() != tc.want {
				t.Errorf("peer %s xff %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
	if _, err := ParseTrustedProxies("10.0.0.0/33"); err == nil {
		t.Error("bad CIDR accepted")
	}
	none, _ := ParseTrustedProxies("")
	if got := none.ClientIP(netip.MustParseAddr("10.0.0.1"), lines("1.1.1.1")); got.String() != "10.0.0.1" {
		t.Errorf("no trusted proxies: %s", got)
	}
}

// A chain longer than maxHops is not walked further: its left part,
// which a client can fill, never picks the address.
func TestClientIPLongChain(t *testing.T) {
	tp, _ := ParseTrustedProxies("10.0.0.0/8")
	chain := "198.51.100.7" + strings.Repeat(", 10.0.0.1", maxHops)
	if got := tp.ClientIP(netip.MustParseAddr("10.0.0.2"), lines(chain)); got.String() != "10.0.0.1" {
		t.Fatalf("%s, want the last trusted hop", got)
	}
}

func TestLimitKey(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"203.0.113.9", "203.0.113.9"},
		{"::ffff:203.0.113.9", "203.0.113.9"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
	}
	for _, tc := range tests {
		if got := LimitKey(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("LimitKey(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}

// FuzzClientIP reads forwarded lines as a proxy would receive them (the
// client's own lines, then the proxy's). Whatever they hold, the answer is
// a valid address that is the peer or appears in them, and reading the
// lines apart is reading them joined into one list.
func FuzzClientIP(f *testing.F) {
	tp, _ := ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::/48")
	f.Add("1.2.3.4, 10.0.0.1", "")
	f.Add("6.6.6.6", "198.51.100.7")
	f.Add("6.6.6.6, garbage", "10.0.0.3")
	f.Add("[2001:db8::1]:80", "2001:db8:ffff::1")
	f.Add(",,", " , ")
	f.Fuzz(func(t *testing.T, first, second string) {
		peer := netip.MustParseAddr("10.0.0.2")
		xff := [][]byte{[]byte(first), []byte(second)}
		got := tp.ClientIP(peer, xff)
		if !got.IsValid() {
			t.Fatal("invalid address returned")
		}
		if got != peer {
			found := false
			for _, l := range xff {
				for _, e := range bytes.Split(l, []byte(",")) {
					if a, ok := parseHop(string(bytes.TrimSpace(e))); ok && a == got {
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("%s is neither the peer nor in %q", got, xff)
			}
		}
		joined := tp.ClientIP(peer, [][]byte{[]byte(first + "," + second)})
		if joined != got {
			t.Fatalf("lines %q: %s; joined: %s", xff, got, joined)
		}
		_ = LimitKey(got)
	})
}

// Every request of every API reads its client address and limit key.
func BenchmarkClientIP(b *testing.B) {
	tp, _ := ParseTrustedProxies("10.0.0.0/8, 192.0.2.0/24, 2001:db8:ffff::/48")
	peer := netip.MustParseAddr("10.0.0.2")
	xff := lines("6.6.6.6, 7.7.7.7|2001:db8:1:2::42, 192.0.2.7|10.0.0.9")
	b.ReportAllocs()
	for b.Loop() {
		_ = LimitKey(tp.ClientIP(peer, xff))
	}
}
