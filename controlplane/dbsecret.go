package controlplane

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
)

// The DocumentDB toolkit's secret: a MongoDB connection string, checked
// against the egress guard before it is stored.

// DBConnectionSecret is the secret of the DocumentDB toolkit: a MongoDB
// connection string whose hosts the platform connects to.
const DBConnectionSecret = "DB_CONNECTION_STRING"

// checkConnectionString refuses (400, field "value") a MongoDB connection
// string with a host on a refused address (loopback, private, link-local,
// metadata), directly, through its name or through its SRV targets. The
// message names the host, never the string (it holds the password). A
// value that is not a mongodb:// string is left to the toolkit (which
// refuses it when used); every connection passes the guard anyway.
func (s *Service) checkConnectionString(ctx context.Context, uri string) error {
	hosts, srv, err := mongoHosts(uri)
	if err != nil {
		// Not a connection string: the toolkit refuses it when used; there
		// is no host to reach.
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g := s.egressGuard()
	for _, h := range hosts {
		switch {
		case strings.HasPrefix(h, "/"): // a Unix socket is a local address
			err = g.CheckHost(ctx, "127.0.0.1")
		case srv:
			err = g.CheckSRV(ctx, "mongodb", "tcp", h)
		default:
			err = g.CheckHost(ctx, h)
		}
		if errors.Is(err, egress.ErrRefused) {
			return cpstate.Invalid("value", "database host %s: %v: databases must be on public addresses", h, err)
		}
	}
	return nil
}

// mongoHosts returns the hosts of a mongodb:// or mongodb+srv:// string
// (without ports; Unix socket paths unescaped).
func mongoHosts(uri string) (hosts []string, srv bool, err error) {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		if rest, ok = strings.CutPrefix(uri, "mongodb+srv://"); !ok {
			return nil, false, errors.New("not a mongodb:// or mongodb+srv:// connection string")
		}
		srv = true
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	for _, hp := range strings.Split(rest, ",") {
		host := hp
		switch {
		case strings.HasPrefix(hp, "["):
			end := strings.Index(hp, "]")
			if end < 0 {
				return nil, false, errors.New("a host has an unclosed [")
			}
			host = hp[1:end]
		case strings.Count(hp, ":") == 1:
			host = hp[:strings.Index(hp, ":")]
		}
		if unesc, err := url.PathUnescape(host); err == nil {
			host = unesc
		}
		if host == "" {
			return nil, false, errors.New("a host is empty")
		}
		hosts = append(hosts, host)
	}
	return hosts, srv, nil
}
