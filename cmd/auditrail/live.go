package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/query"
)

// addLiveFlags adds the flags of the live streams (…/audit_logs/stream).
func addLiveFlags(fs *flags) *int {
	return fs.Int("max-streams", "AUDITRAIL_MAX_STREAMS", query.DefaultMaxStreams,
		"live streams (…/audit_logs/stream) open at once on this server; the next is refused with 503")
}

// serveLive enables the live streams of qs: each follows the event stream
// through nc (the query role's credentials allow its ordered consumers)
// until the client goes away or ctx ends.
func serveLive(ctx context.Context, qs *query.Server, nc *nats.Conn, maxStreams int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("live streams: %w", err)
	}
	cfg := query.DefaultLiveConfig()
	cfg.MaxStreams = maxStreams
	if err := qs.ServeLive(ctx, js, cfg); err != nil {
		return usageErrorf("--max-streams: %v", err)
	}
	return nil
}
