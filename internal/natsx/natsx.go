// Package natsx holds the NATS plumbing shared by every role: the embedded
// JetStream server of `auditrail dev` and tests, and the idempotent creation
// of the event and dead-letter streams.
package natsx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/schemas"
)

// ErrInvalidOption wraps every configuration error of this package.
var ErrInvalidOption = errors.New("invalid option")

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// Listen is host:port of the client listener; port 0 or -1 picks a free one.
	Listen string
	// StoreDir holds the JetStream file store.
	StoreDir string
	// ReadyTimeout bounds start-up.
	ReadyTimeout time.Duration
	// Auth, when set, runs the server in operator mode: only users with a
	// JWT of its account connect, with their role's permissions; an
	// anonymous connection is refused. Nil (tests of single packages)
	// leaves the server open.
	Auth *Auth
	// TLS, when set, serves clients over TLS only; a ClientAuth of
	// tls.RequireAndVerifyClientCert verifies their certificates too.
	TLS *tls.Config
	// Name is the server_name ("auditrail-dev" when empty); each server of
	// a cluster needs its own.
	Name string
	// Cluster, when set, makes the server one of a JetStream cluster.
	Cluster *ClusterConfig
}

// ClusterConfig joins a server to a JetStream cluster: every server has the
// same Name and lists the route listeners of the others.
type ClusterConfig struct {
	// Name of the cluster.
	Name string
	// Listen is host:port of this server's route listener.
	Listen string
	// Routes are the nats-route://host:port URLs of the other servers.
	Routes []string
	// TLS, when set, encrypts the routes between the servers and verifies
	// each peer's certificate (it needs both the server and the client
	// usage): RootCAs checks the servers dialled, ClientCAs those dialling.
	TLS *tls.Config
}

// DefaultServerConfig returns the defaults of `auditrail dev`.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{Listen: "127.0.0.1:4222", StoreDir: "./data/jetstream", ReadyTimeout: 10 * time.Second}
}

// Validate checks the configuration.
func (c ServerConfig) Validate() error {
	if c.StoreDir == "" {
		return fmt.Errorf("%w: nats store dir is empty", ErrInvalidOption)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: nats listen %q: %v", ErrInvalidOption, c.Listen, err)
	}
	if c.ReadyTimeout <= 0 {
		return fmt.Errorf("%w: nats ready timeout must be positive", ErrInvalidOption)
	}
	if c.Cluster != nil {
		if c.Cluster.Name == "" || c.Name == "" {
			return fmt.Errorf("%w: a clustered nats server needs a cluster name and a server name", ErrInvalidOption)
		}
		if _, _, err := net.SplitHostPort(c.Cluster.Listen); err != nil {
			return fmt.Errorf("%w: nats cluster listen %q: %v", ErrInvalidOption, c.Cluster.Listen, err)
		}
	}
	return nil
}

// MaxControlLine is the longest protocol line the server accepts; a
// nats-server serving auditrail needs max_control_line of at least this.
const MaxControlLine = 32 << 10

// StartServer starts an embedded nats-server with JetStream on disk and waits
// until it accepts connections.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, portStr, _ := net.SplitHostPort(cfg.Listen)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("%w: nats port %q", ErrInvalidOption, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	name := cfg.Name
	if name == "" {
		name = "auditrail-dev"
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
		// The CONNECT of a role carries its user JWT with the role's
		// permissions: more than the default 4 KiB.
		MaxControlLine: MaxControlLine,
	}
	if cfg.TLS != nil {
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = cfg.TLS, true, 2
		opts.TLSVerify = cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	if c := cfg.Cluster; c != nil {
		chost, cport, _ := net.SplitHostPort(c.Listen)
		if opts.Cluster.Port, err = strconv.Atoi(cport); err != nil {
			return nil, fmt.Errorf("%w: nats cluster port %q", ErrInvalidOption, cport)
		}
		opts.Cluster.Name, opts.Cluster.Host = c.Name, chost
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("%w: nats route %q: %v", ErrInvalidOption, r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
		if c.TLS != nil {
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = c.TLS, 2
		}
	}
	if cfg.Auth != nil {
		if err := cfg.Auth.configure(opts); err != nil {
			return nil, fmt.Errorf("nats auth: %w", err)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(cfg.ReadyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server not ready after %s", cfg.ReadyTimeout)
	}
	return s, nil
}

// Connect dials url with reconnects that never give up, logging state
// changes. creds, when not empty, is the credentials file of the role (its
// inbox prefix is the one its permissions allow); when the file changes,
// the connection reconnects with the new credentials (credsWatcher).
// extra are more options (TLSFiles.Options).
func Connect(url, name, creds string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	var watch *credsWatcher
	if creds != "" {
		co, err := CredsOptions(creds)
		if err != nil {
			return nil, err
		}
		watch = newCredsWatcher(creds, log)
		extra = append(append(extra, co...), nats.ClosedHandler(watch.stop))
	}
	nc, err := nats.Connect(url, append(extra,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", redact.URL(c.ConnectedUrl())) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats", "err", err, "subscription", subject)
		}),
	)...)
	if err != nil {
		err = fmt.Errorf("connect nats %s: %w", redact.URL(url), err)
		if errTLS(err) {
			err = fmt.Errorf("%w (TLS: give the CA that signed the server's certificate with --nats-tls-ca, and a client certificate with --nats-tls-cert and --nats-tls-key if the server verifies clients)", err)
		}
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(err.Error(), "Authorization Violation") {
			if creds == "" {
				err = fmt.Errorf("%w (no credentials given: pass --nats-creds FILE or AUDITRAIL_NATS_CREDS; `auditrail dev` writes one file per role in DATA/nats/ and prints the admin one's path, which emit, tail and dlq use)", err)
			} else {
				err = fmt.Errorf("%w (the credentials in %s are refused: written for another NATS server or revoked? `auditrail dev` rewrites its own in DATA/nats/ at every start)", err, creds)
			}
		}
		return nil, redact.Error(err, url)
	}
	if watch != nil {
		go watch.run(nc)
	}
	return nc, nil
}

// StreamConfig sets the retention of the event streams.
type StreamConfig struct {
	// Duplicates is the JetStream dedup window (Nats-Msg-Id); at least 10 minutes.
	Duplicates time.Duration
	// MaxAge of events in AUDITRAIL_EVENTS; 0 keeps them until limits say otherwise.
	MaxAge time.Duration
	// Replicas of each stream: 1 on one server, 3 (or 5) in a JetStream
	// cluster. An existing stream is raised or lowered to it.
	Replicas int
}

// MaxReplicas is the most replicas JetStream keeps of a stream.
const MaxReplicas = 5

// ValidateReplicas checks a replica count of --nats-replicas.
func ValidateReplicas(n int) error {
	if n < 1 || n > MaxReplicas {
		return fmt.Errorf("%w: replicas %d not in 1..%d", ErrInvalidOption, n, MaxReplicas)
	}
	return nil
}

// EnsureReplicas sets the replica count of the existing stream name (a KV
// bucket is the stream KV_<bucket>) to n when it differs; JetStream moves
// the data to the new peers in the background. It returns the stream's
// config as it is now.
func EnsureReplicas(ctx context.Context, js jetstream.JetStream, name string, n int) (jetstream.StreamConfig, error) {
	if err := ValidateReplicas(n); err != nil {
		return jetstream.StreamConfig{}, err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	sc := st.CachedInfo().Config
	if sc.Replicas == n || (sc.Replicas == 0 && n == 1) {
		return sc, nil
	}
	old := sc.Replicas
	sc.Replicas = n
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return sc, fmt.Errorf("stream %s: replicas %d to %d: %w", name, old, n, err)
	}
	return sc, nil
}

// DefaultStreamConfig returns a 20-minute dedup window, unlimited age, one replica.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{Duplicates: 20 * time.Minute, Replicas: 1}
}

// MinDuplicates is the shortest dedup window accepted.
const MinDuplicates = 10 * time.Minute

// Validate checks the configuration.
func (c StreamConfig) Validate() error {
	if c.Duplicates < MinDuplicates {
		return fmt.Errorf("%w: duplicate window %s is shorter than %s", ErrInvalidOption, c.Duplicates, MinDuplicates)
	}
	if c.MaxAge != 0 && c.MaxAge < c.Duplicates {
		return fmt.Errorf("%w: max age %s is shorter than the duplicate window", ErrInvalidOption, c.MaxAge)
	}
	return ValidateReplicas(c.Replicas)
}

// EnsureStreams creates AUDITRAIL_EVENTS, AUDITRAIL_DLQ and AUDITRAIL_COMMITS, or updates them to
// cfg. Calling it again with the same config changes nothing.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	streams := []jetstream.StreamConfig{
		{
			Name:        schemas.StreamEvents,
			Description: "auditrail audit and execution events",
			Subjects:    []string{schemas.SubjectEventsAll},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  cfg.Duplicates,
			MaxAge:      cfg.MaxAge,
			Replicas:    cfg.Replicas,
			Discard:     jetstream.DiscardOld,
		},
		{
			Name:        schemas.StreamDLQ,
			Description: "auditrail events that ingest could not decode or accept",
			Subjects:    []string{schemas.SubjectDLQAll},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  cfg.Duplicates,
			Replicas:    cfg.Replicas,
		},
		{
			// One message per organization and kind, the newest: a
			// mark, not a record (schemas.StreamCommits).
			Name:              schemas.StreamCommits,
			Description:       "auditrail: the organizations whose tamper-evidence logs have entries stored since the sequencer last looked",
			Subjects:          []string{schemas.SubjectCommitsAll},
			Storage:           jetstream.FileStorage,
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			Discard:           jetstream.DiscardOld,
			Replicas:          cfg.Replicas,
		},
	}
	for _, sc := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	return nil
}
