package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
)

// addIngestDurableFlag adds --ingest-durable: the durable consumer of the
// ingest instances, whose progress (its watermark) bounds what the role
// reads; bounds says what (the feeds, the logs).
func addIngestDurableFlag(fs *cli.Flags, bounds string) *string {
	return fs.String("ingest-durable", "AUDITRAIL_INGEST_DURABLE", ingest.DefaultConfig().Durable,
		"durable consumer of the ingest instances (their --durable): "+bounds)
}

// serveFeeds enables the feeds of qs: their watermarks are the ack floors
// of ingest's durable consumers, read through nc (the query role may read
// consumer info).
func serveFeeds(qs *query.Server, nc *nats.Conn, auditDurable string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("feeds: %w", err)
	}
	qs.ServeFeedsWith(query.FeedSource{Watermarks: natsx.NewWatermarks(js, 0),
		AuditDurable: auditDurable, ExecutionDurable: ingest.ExecutionDurableFor(auditDurable), Seal: &sealReader{js: js}})
	return nil
}

// sealReader reads the sequencer's seal from the tlog bucket, at most once
// per sealMaxAge however many feeds ask (as the watermarks).
type sealReader struct {
	js     jetstream.JetStream
	mu     sync.Mutex
	kv     jetstream.KeyValue
	at     time.Time
	sealed time.Time
	ok     bool
}

const sealMaxAge = 200 * time.Millisecond

func (r *sealReader) Sealed(ctx context.Context) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.at) < sealMaxAge {
		return r.sealed, r.ok, nil
	}
	if r.kv == nil {
		kv, err := r.js.KeyValue(ctx, natsx.TLogBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return time.Time{}, false, nil // no tlog role yet
		}
		if err != nil {
			return time.Time{}, false, err
		}
		r.kv = kv
	}
	s, ok, err := sequencer.ReadSealed(ctx, r.kv)
	if err != nil {
		return time.Time{}, false, err
	}
	r.at, r.sealed, r.ok = time.Now(), s.Time, ok
	return s.Time, ok, nil
}

// serveAuditKeys enables GET /api/v1/audit_keys on qs: the public signing
// keys in the tlog bucket, read through nc (the query role may read it).
// Until the tlog role has made the bucket, the list is empty.
func serveAuditKeys(qs *query.Server, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("audit keys: %w", err)
	}
	qs.ServeAuditKeysWith(&auditKeys{js: js})
	return nil
}

// auditKeys reads the tlog bucket's public keys, opening the bucket on
// the first call that finds it.
type auditKeys struct {
	js   jetstream.JetStream
	mu   sync.Mutex
	ring *checkpointer.Keyring
}

func (a *auditKeys) PublicKeys(ctx context.Context) ([]tlog.PublicKey, error) {
	a.mu.Lock()
	ring := a.ring
	a.mu.Unlock()
	if ring == nil {
		kv, err := a.js.KeyValue(ctx, natsx.TLogBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return []tlog.PublicKey{}, nil // no key was made yet
		}
		if err != nil {
			return nil, fmt.Errorf("tlog bucket: %w", err)
		}
		if ring, err = checkpointer.NewKeyring(kv, nil, checkpointer.DefaultKeyringConfig(), nil); err != nil {
			return nil, err
		}
		a.mu.Lock()
		a.ring = ring
		a.mu.Unlock()
	}
	return ring.PublicKeys(ctx)
}
