package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
)

// NATSFlags are the NATS flags of every role and tool.
type NATSFlags struct {
	URL, Creds *string
	CredsPoll  *time.Duration
	// MaxAge is nil on the roles that do not create the streams.
	MaxAge *time.Duration
	TLS    NATSTLSFlags
	// replicas is nil on the roles that create neither streams nor buckets.
	replicas *int
}

// NATSTLSFlags are the PEM files of the TLS connection to NATS.
type NATSTLSFlags struct{ ca, cert, key *string }

func addNATSTLSFlags(fs *Flags) NATSTLSFlags {
	return NATSTLSFlags{
		ca:   fs.String("nats-tls-ca", "AUDITRAIL_NATS_TLS_CA", "", "PEM file of the CA that signed the NATS servers' certificates (turns TLS on; empty with a tls:// URL: the system's roots)"),
		cert: fs.String("nats-tls-cert", "AUDITRAIL_NATS_TLS_CERT", "", "PEM file of this role's client certificate, for NATS servers that verify clients (with --nats-tls-key)"),
		key:  fs.String("nats-tls-key", "AUDITRAIL_NATS_TLS_KEY", "", "PEM file of the key of --nats-tls-cert"),
	}
}

// Files are the PEM files given.
func (f NATSTLSFlags) Files() natsx.TLSFiles {
	return natsx.TLSFiles{CA: *f.ca, Cert: *f.cert, Key: *f.key}
}

// AddNATSFlags adds --nats-url and --nats-creds, and --stream-max-age when
// the role creates the streams (controlplane, dev).
func AddNATSFlags(fs *Flags, defURL string, createsStreams bool) NATSFlags {
	f := NATSFlags{
		URL:   fs.String("nats-url", "", defURL, "NATS server URL"),
		Creds: fs.String("nats-creds", "", "", "NATS credentials file of this role (written by auditrail dev in DATA/nats, or by auditrail nats-setup; read again when it changes)"),
	}
	f.CredsPoll = fs.Duration("nats-creds-poll", "", natsx.CredsPollInterval, "how often the credentials file is looked at; a change reconnects with the new credentials (rotation without a restart)")
	f.TLS = addNATSTLSFlags(fs)
	if createsStreams {
		f.MaxAge = fs.Duration("stream-max-age", "", 0, "retention of AUDITRAIL_EVENTS (0 keeps events until removed by hand)")
	}
	return f
}

// WithReplicas adds --nats-replicas, for the roles that create streams or
// KV buckets.
func (f NATSFlags) WithReplicas(fs *Flags) NATSFlags {
	f.replicas = fs.Int("nats-replicas", "", 1, "replicas of every stream and KV bucket this role creates, 1..5 (3 in a JetStream cluster); an existing one is raised or lowered to it")
	return f
}

// Replicas is --nats-replicas (1 where the role has no such flag).
func (f NATSFlags) Replicas() int {
	if f.replicas == nil {
		return 1
	}
	return *f.replicas
}

// Connect dials NATS with the role's credentials.
func (f NATSFlags) Connect(name string, log *slog.Logger) (*nats.Conn, error) {
	if err := natsx.ValidateReplicas(f.Replicas()); err != nil {
		return nil, UsageErrorf("--nats-replicas: %v", err)
	}
	opts, err := f.TLS.Files().Options()
	if err != nil {
		return nil, Usage(err)
	}
	f.SetCredsPoll()
	return natsx.Connect(*f.URL, name, *f.Creds, log, opts...)
}

// SetCredsPoll applies --nats-creds-poll (one setting per process).
func (f NATSFlags) SetCredsPoll() {
	if *f.CredsPoll > 0 {
		natsx.CredsPollInterval = *f.CredsPoll
	}
}

// EnsureStreams creates or updates the event and dead-letter streams with
// replicas each: only the roles allowed to (controlplane, dev) do.
func EnsureStreams(ctx context.Context, nc *nats.Conn, maxAge time.Duration, replicas int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := natsx.DefaultStreamConfig()
	cfg.MaxAge = maxAge
	cfg.Replicas = replicas
	sctx, cancel := context.WithTimeout(ctx, NATSAttemptTimeout)
	defer cancel()
	return natsx.EnsureStreams(sctx, js, cfg)
}

// NATSAttemptTimeout bounds one attempt to create or update streams and
// buckets; the callers retry. On a JetStream cluster, two instances
// creating the same replicated stream at once may both wait for an answer
// that never comes although the stream is made: a bounded attempt lets the
// next one find it.
const NATSAttemptTimeout = 10 * time.Second

// WaitStreams waits until the controlplane role has created the streams
// (all when names is empty).
func WaitStreams(ctx context.Context, nc *nats.Conn, log *slog.Logger, names ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return natsx.WaitStreams(ctx, js, log, names...)
}
