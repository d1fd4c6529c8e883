package httpx

import (
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	tp, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		peer, xff, want string
	}{
		{"203.0.113.9", "", "203.0.113.9"},
		{"203.0.113.9", "1.2.3.4", "203.0.113.9"},              // untrusted peer: header ignored
		{"10.1.2.3", "198.51.100.7", "198.51.100.7"},           // trusted proxy
		{"10.1.2.3", "6.6.6.6, 198.51.100.7", "198.51.100.7"},  // left-most is the client's claim
		{"10.1.2.3", "198.51.100.7, 10.9.9.9", "198.51.100.7"}, // chain of trusted proxies
		{"192.0.2.1", "2001:db8::5", "2001:db8::5"},
		{"10.1.2.3", "not-an-ip", "10.1.2.3"},
		{"10.1.2.3", "10.2.2.2", "10.1.2.3"},
		{"::ffff:10.1.2.3", "198.51.100.7", "198.51.100.7"},
	}
	for _, tc := range tests {
		got := tp.ClientIP(netip.MustParseAddr(tc.peer), tc.xff)
		if got.String() != tc.want {
			t.Errorf("peer %s xff %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("10.0.0.0/33"); err == nil {
		t.Error("bad CIDR accepted")
	}
	none, _ := ParseTrustedProxies("")
	if got := none.ClientIP(netip.MustParseAddr("10.0.0.1"), "1.1.1.1"); got.String() != "10.0.0.1" {
		t.Errorf("no trusted proxies: %s", got)
	}
}

func FuzzClientIP(f *testing.F) {
	tp, _ := ParseTrustedProxies("10.0.0.0/8")
	f.Add("1.2.3.4, 10.0.0.1")
	f.Fuzz(func(t *testing.T, xff string) {
		got := tp.ClientIP(netip.MustParseAddr("10.0.0.2"), xff)
		if !got.IsValid() {
			t.Fatal("invalid address returned")
		}
	})
}
