package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/query"
)

// readFlags are the flags of the query service's long-lived answers: the
// live streams (…/audit_logs/stream) and the exports, bounded in all, per
// organization and per credential.
type readFlags struct {
	streams, streamsPerOrg, streamsPerCred *int
	exports, exportsPerOrg, exportsPerCred *int
	streamLifetime                         *time.Duration
}

// addReadFlags adds the read flags.
func addReadFlags(fs *cli.Flags) readFlags {
	ex := query.DefaultExportLimits()
	return readFlags{
		streams: fs.Int("max-streams", "AUDITRAIL_MAX_STREAMS", query.DefaultMaxStreams,
			"live streams (…/audit_logs/stream) open at once on this server; the next is refused with 503"),
		streamsPerOrg: fs.Int("max-streams-per-org", "AUDITRAIL_MAX_STREAMS_PER_ORG", query.DefaultMaxStreamsPerOrg,
			"live streams of one organization open at once (the platform admin's not counted); the next is refused with 429"),
		streamsPerCred: fs.Int("max-streams-per-credential", "AUDITRAIL_MAX_STREAMS_PER_CREDENTIAL", query.DefaultMaxStreamsPerCredential,
			"live streams of one credential open at once; the next is refused with 429"),
		streamLifetime: fs.Duration("stream-lifetime", "AUDITRAIL_STREAM_LIFETIME", query.DefaultStreamLifetime,
			"a live stream ends after this long with a reconnect event (the client resumes with Last-Event-ID and authenticates again)"),
		exports: fs.Int("max-exports", "AUDITRAIL_MAX_EXPORTS", ex.Max,
			"exports streaming at once on this server; the next is refused with 503"),
		exportsPerOrg: fs.Int("max-exports-per-org", "AUDITRAIL_MAX_EXPORTS_PER_ORG", ex.PerOrg,
			"exports of one organization streaming at once (the platform admin's not counted); the next is refused with 429"),
		exportsPerCred: fs.Int("max-exports-per-credential", "AUDITRAIL_MAX_EXPORTS_PER_CREDENTIAL", ex.PerCredential,
			"exports of one credential streaming at once; the next is refused with 429"),
	}
}

// queryConfig is the query service's configuration: the cursor keys, the
// export limits and the proxies whose X-Forwarded-For names the client of a
// recorded bulk read.
func (r readFlags) queryConfig(keys [][]byte, proxies httpx.TrustedProxies) (query.Config, error) {
	cfg := query.DefaultConfig()
	cfg.CursorKeys, cfg.Proxies = keys, proxies
	cfg.Exports = query.Limits{Max: *r.exports, PerOrg: *r.exportsPerOrg, PerCredential: *r.exportsPerCred}
	if err := cfg.Exports.Validate("exports"); err != nil {
		return cfg, cli.UsageErrorf("--max-exports, --max-exports-per-org, --max-exports-per-credential: %v", err)
	}
	return cfg, nil
}

// serveLive enables the live streams of qs: each follows the event stream
// through nc (the query role's credentials allow its ordered consumers)
// until the client goes away or ctx ends.
func (r readFlags) serveLive(ctx context.Context, qs *query.Server, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("live streams: %w", err)
	}
	cfg := query.DefaultLiveConfig()
	cfg.MaxStreams, cfg.MaxStreamsPerOrg, cfg.MaxStreamsPerCredential = *r.streams, *r.streamsPerOrg, *r.streamsPerCred
	cfg.MaxLifetime = *r.streamLifetime
	if err := qs.ServeLive(ctx, js, cfg); err != nil {
		return cli.UsageErrorf("--max-streams, --max-streams-per-org, --max-streams-per-credential, --stream-lifetime: %v", err)
	}
	return nil
}
