package main

import (
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/query"
)

// addFeedFlags adds the flag of the feeds (…/audit_logs/feed): the durable
// consumer of the ingest instances, whose progress bounds the feeds.
func addFeedFlags(fs *flags) *string {
	return fs.String("ingest-durable", "AUDITRAIL_INGEST_DURABLE", ingest.DefaultConfig().Durable,
		"durable consumer of the ingest instances (their --durable): the feeds show what it has committed")
}

// serveFeeds enables the feeds of qs: their watermarks are the ack floors
// of ingest's durable consumers, read through nc (the query role may read
// consumer info).
func serveFeeds(qs *query.Server, nc *nats.Conn, auditDurable string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("feeds: %w", err)
	}
	qs.ServeFeedsWith(query.FeedSource{Watermarks: ingest.NewWatermarks(js, 0),
		AuditDurable: auditDurable, ExecutionDurable: ingest.ExecutionDurableFor(auditDurable)})
	return nil
}
