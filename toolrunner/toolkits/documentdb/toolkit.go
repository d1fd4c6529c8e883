// Package documentdb is the DocumentDbToolkit (seeds/002): explore and query
// a MongoDB-compatible database — discover databases and collections, sample
// a collection's schema, find, count and aggregate — read-only, with every
// value returned as relaxed Extended JSON.
package documentdb

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/toolrunner"
)

// Name and Version of the toolkit.
const (
	Name    = "DocumentDbToolkit"
	Version = "0.4.0"
	// SecretName is the secret every tool requires.
	SecretName = "DB_CONNECTION_STRING"
)

// Config tunes the toolkit.
type Config struct {
	// MaxTime bounds every query on the server (maxTimeMS).
	MaxTime time.Duration
	// MaxSampleSize bounds GetCollectionSchema's sample_size.
	MaxSampleSize int64
	// MaxClients bounds the cached clients (one per connection string).
	MaxClients int
	// MaxOutputBytes bounds the JSON of one FindDocuments or
	// AggregateDocuments result; a larger one fails the call.
	MaxOutputBytes int
	// ConnectTimeout bounds reaching the server.
	ConnectTimeout time.Duration
	// Egress refuses database hosts on loopback, private and link-local
	// addresses, checked on every connection (nil: egress.Strict()).
	Egress *egress.Guard
	// Log receives what callers are not told: why a database could not be
	// reached (nil: slog.Default()).
	Log *slog.Logger
}

// DefaultConfig: 20 s per query, samples of at most 10,000 documents,
// 64 clients, results of at most 16 MiB, 5 s to reach the server.
func DefaultConfig() Config {
	return Config{MaxTime: 20 * time.Second, MaxSampleSize: 10_000, MaxClients: 64, MaxOutputBytes: DefaultMaxOutputBytes,
		ConnectTimeout: 5 * time.Second, Egress: egress.Strict()}
}

// Toolkit holds the clients, one per connection string, reused across calls.
type Toolkit struct {
	cfg     Config
	mu      sync.Mutex
	clients map[[32]byte]*mongo.Client
}

// New returns the toolkit.
func New(cfg Config) *Toolkit {
	if cfg.Egress == nil {
		cfg.Egress = egress.Strict()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return &Toolkit{cfg: cfg, clients: map[[32]byte]*mongo.Client{}}
}

// Close disconnects every client.
func (t *Toolkit) Close(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, c := range t.clients {
		_ = c.Disconnect(ctx)
		delete(t.clients, k)
	}
}

func (t *Toolkit) client(ctx context.Context, uri string) (*mongo.Client, error) {
	if uri == "" {
		return nil, toolrunner.Errorf(toolrunner.KindSecretMissing, false, "the secret %s is empty", SecretName)
	}
	k := sha256.Sum256([]byte(uri))
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[k]; ok {
		return c, nil
	}
	opts := options.Client().ApplyURI(uri).SetServerSelectionTimeout(t.cfg.ConnectTimeout).SetConnectTimeout(t.cfg.ConnectTimeout).
		SetAppName("auditrail-documentdb").
		// Every connection (SRV targets included) passes the egress guard.
		SetDialer(t.cfg.Egress.Dialer(net.Dialer{Timeout: t.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}))
	if err := opts.Validate(); err != nil {
		return nil, toolrunner.Errorf("CONFIGURATION_ERROR", false, "the secret %s is not a valid connection string", SecretName)
	}
	c, err := mongo.Connect(ctx, opts)
	if err != nil {
		return nil, toolrunner.Errorf("CONFIGURATION_ERROR", false, "the secret %s is not a valid connection string: %v", SecretName, redact(err))
	}
	if len(t.clients) >= t.cfg.MaxClients {
		for old, oc := range t.clients { // drop one; connection strings rarely change
			_ = oc.Disconnect(context.Background())
			delete(t.clients, old)
			break
		}
	}
	t.clients[k] = c
	return c, nil
}

// redact keeps connection strings (and their passwords) out of messages.
func redact(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// upstreamError is a tool error whose cause only the operator log sees.
type upstreamError struct {
	te     *toolrunner.Error
	detail error
}

func (e *upstreamError) Error() string { return e.te.Error() }
func (e *upstreamError) Unwrap() error { return e.te }

// upstream turns a driver error into a tool error. That the database
// cannot be reached is all a caller learns (no address, port or dialler
// message: the platform is not a port scanner); Run logs the detail.
func upstream(err error, what string) error {
	var te *toolrunner.Error
	switch {
	case errors.As(err, &te):
		return te
	case mongo.IsNetworkError(err) || errors.Is(err, mongo.ErrClientDisconnected) || isServerSelection(err) || errors.Is(err, egress.ErrRefused):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, true, "%s: the database cannot be reached (endpoint not reachable)", what), err}
	case errors.Is(err, context.DeadlineExceeded) || mongo.IsTimeout(err):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindTimeout, true, "%s: the database did not answer in time", what), err}
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return toolrunner.Errorf(toolrunner.KindUpstream, false, "%s: the database refused: %s", what, ce.Message)
	}
	if strings.Contains(err.Error(), "connection(") { // a driver connection error
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, true, "%s: the database cannot be reached (endpoint not reachable)", what), err}
	}
	return toolrunner.Errorf(toolrunner.KindUpstream, false, "%s: %s", what, redact(err))
}

func isServerSelection(err error) bool {
	s := err.Error()
	return strings.Contains(s, "server selection error") || strings.Contains(s, "no reachable servers") || strings.Contains(s, "connection refused")
}

// hiddenDatabases are the server's own.
var hiddenDatabases = map[string]bool{"admin": true, "config": true, "local": true}

// collection checks that the database and collection exist.
func (t *Toolkit) collection(ctx context.Context, c *mongo.Client, db, coll string) (*mongo.Collection, error) {
	if hiddenDatabases[db] {
		return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "database %q is not available", db)
	}
	names, err := c.Database(db).ListCollectionNames(ctx, bson.D{{Key: "name", Value: coll}})
	if err != nil {
		return nil, upstream(err, "listing collections")
	}
	if len(names) == 0 {
		dbs, err := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: db}})
		if err == nil && len(dbs) == 0 {
			return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "database %q does not exist; DiscoverDatabases lists them", db)
		}
		return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "collection %q does not exist in database %q; DiscoverCollections lists them", coll, db)
	}
	return c.Database(db).Collection(coll), nil
}

// toJSON renders a document as relaxed Extended JSON.
func toJSON(doc bson.Raw) (string, error) {
	b, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		return "", fmt.Errorf("serialize document: %w", err)
	}
	return string(b), nil
}
