// Package httpx holds HTTP plumbing shared by the APIs: the client IP behind
// trusted proxies.
package httpx

import (
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

// ClientIP returns the client address of a request from peer (the TCP
// peer) and its X-Forwarded-For header: the peer itself unless it is a
// trusted proxy; otherwise the right-most address of the header that is not
// a trusted proxy (addresses further left are the client's own claims).
func (t TrustedProxies) ClientIP(peer netip.Addr, xff string) netip.Addr {
	peer = peer.Unmap()
	if !t.trusted(peer) || xff == "" {
		return peer
	}
	hops := strings.Split(xff, ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a malformed chain is not believed
		}
		a = a.Unmap()
		if !t.trusted(a) {
			return a
		}
	}
	return peer
}
