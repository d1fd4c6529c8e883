// Package httpx holds HTTP plumbing shared by the APIs: the client IP behind
// trusted proxies, and the key a client is rate-limited by.
package httpx

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// TrustedProxies is the set of peers whose X-Forwarded-For is believed.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// ParseTrustedProxies parses comma-separated IPs or CIDRs ("" trusts nobody).
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var t TrustedProxies
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return t, fmt.Errorf("trusted proxy %q: %w", part, err)
			}
			part = netip.PrefixFrom(a, a.BitLen()).String()
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return t, fmt.Errorf("trusted proxy %q: %w", part, err)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

func (t TrustedProxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxHops bounds the addresses of X-Forwarded-For read from the right: a
// chain longer than this is not believed beyond it.
const maxHops = 64

// ClientIP returns the client address of a request from peer (the TCP
// peer) given every X-Forwarded-For line of the request, in the order
// received (with fasthttp: c.Request().Header.PeekAll("X-Forwarded-For")).
// A proxy may append its own line instead of extending the first one, so
// the lines are read as one list: the first line's entries first.
//
// An untrusted peer is the client, whatever it forwarded. Otherwise the
// list is walked from the right: each trusted address is a proxy that
// forwarded the request, the first untrusted one is the client (addresses
// further left are the client's own claims). When every address is a
// trusted proxy the left-most is the client. A malformed entry ends the
// walk: the last trusted hop reached is returned, so that garbage never
// picks the address.
func (t TrustedProxies) ClientIP(peer netip.Addr, xff [][]byte) netip.Addr {
	peer = peer.WithZone("").Unmap()
	if !t.trusted(peer) {
		return peer
	}
	last := peer // the last trusted hop reached
	hops := 0
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for len(line) > 0 {
			var entry []byte
			if j := bytes.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				entry, line = line, nil
			}
			entry = bytes.TrimSpace(entry)
			if len(entry) == 0 {
				continue // an empty list element (RFC 9110 §5.6.1): ignored
			}
			if hops++; hops > maxHops {
				return last
			}
			a, ok := parseHop(string(entry))
			if !ok {
				return last
			}
			if !t.trusted(a) {
				return a
			}
			last = a
		}
	}
	return last
}

// parseHop parses an entry of X-Forwarded-For: an address, or an address
// with a port ("192.0.2.1:443", "[2001:db8::1]:443") as some proxies write.
// Zones are dropped: they mean nothing beyond the host that wrote them.
func parseHop(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.WithZone("").Unmap(), true
}

// LimitKey is the key a client address is rate-limited by: an IPv4 address
// per address, an IPv6 address per /64 (one subscriber usually holds a
// whole /64 and could otherwise take a fresh bucket per request). The
// address stored in audit events stays the full one.
func LimitKey(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}
