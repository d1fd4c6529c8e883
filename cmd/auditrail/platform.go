package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/datadir"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/producers"
)

// accessFlags are the flags of every role that authenticates callers.
type accessFlags struct {
	bootKey, jwks, jwtIssuer, jwtAudience, trusted *string
	jwksReload                                     *time.Duration
}

func addAccessFlags(fs *cli.Flags) accessFlags {
	return accessFlags{
		bootKey:     fs.String("bootstrap-key", "", "", "platform-admin API key (dev default: generated, printed, kept in DATA)"),
		jwks:        fs.String("jwks", "", "", "JWKS file of the keys that sign bearer JWTs (HS256 oct, RS256 RSA, EdDSA OKP); JWTs are refused without it"),
		jwtIssuer:   fs.String("jwt-issuer", "", "", "required iss of JWTs"),
		jwtAudience: fs.String("jwt-audience", "", "", "required aud of JWTs"),
		jwksReload:  fs.Duration("jwks-reload", "", auth.DefaultJWKSReload, "how often the --jwks file is read again: a key removed from it stops verifying; a file that cannot be used keeps the keys in use"),
		trusted:     fs.String("trusted-proxies", "", "", "comma-separated IPs/CIDRs whose X-Forwarded-For is believed (every X-Forwarded-For line is read, from the right)"),
	}
}

// controlPlane is the state and access of one process.
type controlPlane struct {
	state   *cpstate.State
	access  *cpstate.Access
	proxies httpx.TrustedProxies
	// bg is the life of the process's background work (the mirror, the
	// admin service's outbox).
	bg context.Context
	// freshBootKey is the bootstrap key when dev keeps it in DATA (made at
	// this start or an earlier one), or "" (given, or kept as a hash only).
	freshBootKey string
}

// openControlPlane mirrors the control-plane state of NATS and builds the
// authenticator. dataDir (dev) keeps a generated bootstrap key hash. Only
// the control plane writes the state: the other roles open it readOnly
// (their NATS credentials could not write it anyway).
func openControlPlane(ctx context.Context, nc *nats.Conn, f accessFlags, dataDir string, readOnly bool, replicas int, log *slog.Logger) (*controlPlane, error) {
	proxies, err := httpx.ParseTrustedProxies(*f.trusted)
	if err != nil {
		return nil, cli.Usage(err)
	}
	var verifier *auth.JWTVerifier
	if *f.jwks != "" {
		if verifier, err = auth.LoadJWKSFile(*f.jwks, auth.JWTConfig{Issuer: *f.jwtIssuer, Audience: *f.jwtAudience, Leeway: 30 * time.Second, Reload: *f.jwksReload}); err != nil {
			return nil, cli.Usage(err)
		}
		go func() { _ = verifier.Run(ctx, log) }() // reads the file again until ctx ends
	}
	if *f.bootKey == "" && dataDir == "" {
		return nil, cli.UsageErrorf("--bootstrap-key is required")
	}
	hash, freshKey, err := datadir.BootstrapKey(*f.bootKey, dataDir, os.Stdout)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	scfg := cpstate.DefaultStateConfig()
	scfg.ReadOnly = readOnly
	scfg.Replicas = replicas
	// Retried, each attempt bounded: on a JetStream cluster, instances
	// creating the same replicated bucket at once may each wait for an
	// answer that never comes, although the bucket is made (the next
	// attempt finds it).
	var state *cpstate.State
	err = retry.Do(ctx, httpapi.StartPolicy, func(ctx context.Context) error {
		// The state's watch lives on actx: it is cancelled only when the
		// attempt fails or runs out of time, not when it succeeds.
		actx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(cli.NATSAttemptTimeout, cancel)
		st, err := cpstate.OpenState(actx, js, scfg, log)
		if !timer.Stop() && err == nil {
			err = fmt.Errorf("control-plane bucket: no answer in %s", cli.NATSAttemptTimeout)
		}
		if err != nil {
			cancel()
			return err
		}
		state = st
		return nil
	}, func(err error, next time.Duration) {
		log.Info("waiting for the control-plane bucket", "err", err, "retry_in", next.Round(time.Millisecond))
	})
	if err != nil {
		return nil, err
	}
	return &controlPlane{state: state, access: cpstate.NewAccess(state, hash, verifier), proxies: proxies, bg: ctx, freshBootKey: freshKey}, nil
}

// adminService builds the admin API: sealer, recorder, service.
func (cp *controlPlane) adminService(pub *producers.Publisher, secretsKeys, dataDir string, retention cpstate.RetentionBounds, log *slog.Logger) (*controlplane.Service, error) {
	keys, err := datadir.Keys("secrets-keys", secretsKeys, dataDir, datadir.SecretsKeyFile, 32)
	if err != nil {
		return nil, err
	}
	sealer, err := cpstate.NewSealer(keys...)
	if err != nil {
		return nil, cli.Usage(err)
	}
	cfg := controlplane.DefaultServiceConfig()
	cfg.Retention = retention
	svc, err := controlplane.NewService(cfg, cp.state, cp.access, sealer, producers.NewRecorder(pub, 2*time.Second), cp.proxies, log)
	if err != nil {
		return nil, err
	}
	go func() { _ = svc.Run(cp.bg) }() // republishes the outbox on start, then periodically
	return svc, nil
}

// API families with a rate limit each: their KV buckets, flags and
// defaults. Each family counts per client IP in its own bucket, shared by
// every instance, so a busy tool caller does not use up the audit pollers'
// budget.
var (
	auditLimit = limitFamily{flag: "rate-limit", bucket: "auditrail_ratelimit", def: "100/60s", what: "audit API"}
	adminLimit = limitFamily{flag: "admin-rate-limit", bucket: "auditrail_ratelimit_admin", def: "300/60s", what: "admin API"}
	toolLimit  = limitFamily{flag: "tool-rate-limit", bucket: "auditrail_ratelimit_tools", def: "600/60s", what: "tool runner API"}
)

type limitFamily struct{ flag, bucket, def, what string }

// add defines the family's flag.
func (f limitFamily) add(fs *cli.Flags) *string {
	return fs.String(f.flag, "", f.def, f.what+" requests per window per client IP, shared by all instances")
}

// rateLimiter builds the shared limiter of one API family; log gets its
// outages (while its bucket fails it counts in the process).
func rateLimiter(ctx context.Context, nc *nats.Conn, f limitFamily, replicas int, spec string, log *slog.Logger) (*ratelimit.Limiter, error) {
	s, err := ratelimit.ParseSpec(spec)
	if err != nil {
		return nil, cli.UsageErrorf("--%s: %v", f.flag, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	l, err := ratelimit.New(ctx, js, f.bucket, s, ratelimit.WithLogger(log.With("limit", f.flag)), ratelimit.WithReplicas(replicas))
	if err != nil {
		return nil, fmt.Errorf("rate limiter of the %s: %w", f.what, err)
	}
	return l, nil
}
