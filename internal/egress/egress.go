// Package egress keeps the platform from calling what a tenant must not
// reach through it: loopback (the NATS port, local admin APIs), private
// networks, link-local addresses (the cloud metadata service
// 169.254.169.254), shared address space, multicast and unspecified
// addresses, in every spelling (IPv4-mapped IPv6, NAT64).
//
// A Guard is used twice: when a destination is configured (CheckURL,
// CheckHost: the literal address and what the name resolves to now), and
// on every connection (Dialer: net.Dialer.Control sees the address
// actually dialled, so a name that resolves to a public address when
// configured and to 127.0.0.1 later — DNS rebinding — is refused).
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors of the package.
var (
	// ErrRefused: the destination is in a refused range.
	ErrRefused = errors.New("egress refused")
	// ErrUnresolved: a host name did not resolve (nothing was refused).
	ErrUnresolved = errors.New("host does not resolve")
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("invalid egress config")
)

// Class is the kind of an address.
type Class string

// Address classes. Every class but Public is refused unless the mode
// allows it.
const (
	Public      Class = "public"
	Loopback    Class = "loopback"
	Private     Class = "private"
	LinkLocal   Class = "link-local"
	Shared      Class = "shared (CGNAT)"
	Multicast   Class = "multicast"
	Unspecified Class = "unspecified"
	Reserved    Class = "reserved"
)

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	future   = netip.MustParsePrefix("240.0.0.0/4") // and 255.255.255.255
	siteLoc  = netip.MustParsePrefix("fec0::/10")   // deprecated site-local: private
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc = netip.MustParsePrefix("64:ff9b:1::/48")
	v4compat = netip.MustParsePrefix("::/96") // deprecated IPv4-compatible
)

// Classify returns the class of ip. IPv4-mapped (::ffff:a.b.c.d) and
// NAT64 (64:ff9b::a.b.c.d) addresses are classified by the IPv4 address
// they carry; a zone is ignored.
func Classify(ip netip.Addr) Class {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		return Classify(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	switch {
	case !ip.IsValid():
		return Reserved
	case ip.IsUnspecified() || thisNet.Contains(ip):
		return Unspecified
	case ip.IsLoopback():
		return Loopback
	case ip.IsPrivate() || siteLoc.Contains(ip) || nat64Loc.Contains(ip):
		return Private
	case ip.IsLinkLocalUnicast():
		return LinkLocal
	case cgnat.Contains(ip):
		return Shared
	case ip.IsMulticast():
		return Multicast
	case future.Contains(ip) || (ip.Is6() && v4compat.Contains(ip)):
		return Reserved
	}
	return Public
}

// Mode says which classes a guard allows besides Public.
type Mode string

// Modes.
const (
	// ModeStrict allows public addresses only (the production default).
	ModeStrict Mode = "strict"
	// ModeDev also allows loopback, for hook servers and emulators on the
	// developer's machine; the guard logs that it does.
	ModeDev Mode = "dev"
	// ModeAllowPrivate allows every address (--allow-private-egress), for
	// deployments whose hook servers and databases are on private networks.
	ModeAllowPrivate Mode = "allow-private"
)

// Resolver resolves host names (net.DefaultResolver; tests substitute one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// Config configures a Guard.
type Config struct {
	Mode Mode
	// Resolver resolves names when a destination is checked and, when set,
	// also when one is dialled (nil: the system resolver, and the dialer
	// resolves by itself; Control checks the address either way).
	Resolver Resolver
}

// DefaultConfig refuses every address that is not public.
func DefaultConfig() Config { return Config{Mode: ModeStrict} }

// Validate checks the mode.
func (c Config) Validate() error {
	switch c.Mode {
	case ModeStrict, ModeDev, ModeAllowPrivate:
		return nil
	}
	return fmt.Errorf("%w: mode %q is not strict, dev or allow-private", ErrInvalidConfig, c.Mode)
}

// RefusedError is a destination in a refused range.
type RefusedError struct {
	Host  string // as configured, when known
	Addr  netip.Addr
	Class Class
}

func (e *RefusedError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("%s resolves to %s, a %s address", e.Host, e.Addr, e.Class)
	}
	return fmt.Sprintf("%s is a %s address", e.Addr, e.Class)
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Guard refuses destinations by address class. It is safe for concurrent use.
type Guard struct {
	mode Mode
	res  Resolver
	log  *slog.Logger
}

// New returns a guard; it logs the modes that relax the default.
func New(cfg Config, log *slog.Logger) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	switch cfg.Mode {
	case ModeDev:
		log.Info("egress: loopback destinations allowed (dev); private, link-local and metadata addresses stay refused")
	case ModeAllowPrivate:
		log.Warn("egress: every destination allowed (--allow-private-egress), including loopback, private networks and 169.254.169.254")
	}
	return &Guard{mode: cfg.Mode, res: cfg.Resolver, log: log}, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Strict returns a guard in the production default mode.
func Strict() *Guard { return &Guard{mode: ModeStrict, log: quiet} }

// AllowLoopback returns a quiet guard that also allows loopback: for tests
// that run hook servers and databases on 127.0.0.1.
func AllowLoopback() *Guard { return &Guard{mode: ModeDev, log: quiet} }

// Mode returns the guard's mode.
func (g *Guard) Mode() Mode { return g.mode }

// Allowed reports whether ip may be dialled, and its class.
func (g *Guard) Allowed(ip netip.Addr) (Class, bool) {
	c := Classify(ip)
	switch {
	case c == Public || g.mode == ModeAllowPrivate:
		return c, true
	case c == Loopback && g.mode == ModeDev:
		return c, true
	}
	return c, false
}

// CheckAddr returns a *RefusedError when ip is refused.
func (g *Guard) CheckAddr(ip netip.Addr) error {
	if c, ok := g.Allowed(ip); !ok {
		return &RefusedError{Addr: ip.WithZone(""), Class: c}
	}
	return nil
}

func (g *Guard) resolver() Resolver {
	if g.res != nil {
		return g.res
	}
	return net.DefaultResolver
}

// CheckHost checks a host (an address literal, bracketed or not, or a
// name): a literal is classified, a name is resolved and refused when any
// of its addresses is. A name that does not resolve returns an error
// wrapping ErrUnresolved.
func (g *Guard) CheckHost(ctx context.Context, host string) error {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr(ip)
	}
	if g.mode == ModeAllowPrivate {
		return nil
	}
	if numericName(host) {
		// 127.1, 2130706433, 0x7f000001: some resolvers read these as
		// addresses; no name has a numeric top-level label.
		return fmt.Errorf("%w: %q is not a canonical IP address", ErrRefused, host)
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: %s: %v", ErrUnresolved, host, err)
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			err.(*RefusedError).Host = host
			return err
		}
	}
	return nil
}

// numericName reports whether the last label of host is a number (decimal,
// octal or 0x hexadecimal).
func numericName(host string) bool {
	last := strings.TrimSuffix(host, ".")
	if i := strings.LastIndex(last, "."); i >= 0 {
		last = last[i+1:]
	}
	if last == "" {
		return false
	}
	if l := strings.ToLower(last); strings.HasPrefix(l, "0x") {
		return strings.Trim(l[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// CheckURL checks the host of an absolute URL.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrRefused, raw)
	}
	return g.CheckHost(ctx, u.Hostname())
}

// CheckSRV checks every target of an SRV name (mongodb+srv://): the targets
// are what a client connects to.
func (g *Guard) CheckSRV(ctx context.Context, service, proto, name string) error {
	if g.mode == ModeAllowPrivate {
		return nil
	}
	_, srvs, err := g.resolver().LookupSRV(ctx, service, proto, name)
	if err != nil || len(srvs) == 0 {
		return fmt.Errorf("%w: _%s._%s.%s: %v", ErrUnresolved, service, proto, name, err)
	}
	for _, s := range srvs {
		if err := g.CheckHost(ctx, strings.TrimSuffix(s.Target, ".")); err != nil {
			return err
		}
	}
	return nil
}

// Control is a net.Dialer Control function: it refuses to connect to an
// address the guard refuses, and logs the refusal for the operator.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.mode == ModeAllowPrivate {
		return nil
	}
	if strings.HasPrefix(network, "unix") { // a local socket: loopback
		if g.mode != ModeDev {
			g.log.Warn("egress refused", "network", network, "address", address, "class", string(Loopback))
			return fmt.Errorf("%w: %s socket %s is local", ErrRefused, network, address)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not an address", ErrRefused, network, address)
	}
	c, ok := g.Allowed(ap.Addr())
	if !ok {
		g.log.Warn("egress refused", "network", network, "address", address, "class", string(c))
		return &RefusedError{Addr: ap.Addr().WithZone(""), Class: c}
	}
	if c == Loopback {
		g.log.Debug("egress to loopback allowed (dev)", "address", address)
	}
	return nil
}

// Dialer dials through the guard. It satisfies the mongo driver's
// options.ContextDialer and http.Transport's DialContext.
type Dialer struct {
	g *Guard
	d net.Dialer
}

// Dialer returns a dialer that checks every address it connects to; base
// supplies timeouts and keep-alive (its Control is replaced).
func (g *Guard) Dialer(base net.Dialer) *Dialer {
	base.Control = g.Control
	base.ControlContext = nil
	return &Dialer{g: g, d: base}
}

// Transport is an HTTP transport whose every connection passes the guard:
// http.DefaultTransport's settings, no proxy (the guard must see the real
// destination), connections dialled within dialTimeout.
func (g *Guard) Transport(dialTimeout time.Duration) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = g.Dialer(net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return tr
}

// DialContext connects to address. With the guard's own resolver, a name is
// resolved by it and its addresses are dialled in turn; either way the
// address connected to passes Control.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if d.g.res == nil {
		return d.d.DialContext(ctx, network, address)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.d.DialContext(ctx, network, address)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: port %q: %w", address, port, err)
	}
	addrs, err := d.g.res.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		c, err := d.d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(p)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: %s", ErrUnresolved, host)
	}
	return nil, first
}
