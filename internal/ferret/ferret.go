// Package ferret runs FerretDB (v1, SQLite backend) in-process: a real
// MongoDB-wire server for the DocumentDbToolkit tests and `auditrail dev
// --demo`, with a sample database.
package ferret

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running FerretDB.
type Server struct {
	URI    string
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs FerretDB on a free loopback port with its SQLite files in dir.
func Start(dir string, log *slog.Logger) (*Server, error) { return StartOn(dir, "127.0.0.1:0", log) }

// StartOn is Start listening on addr.
func StartOn(dir, addr string, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Logger:    log,
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	})
	if err != nil {
		return nil, fmt.Errorf("ferretdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = f.Run(ctx)
	}()
	// MongoDBURI is known once the listener is up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.URI = f.MongoDBURI()
		if s.URI != "" {
			return s, nil
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("ferretdb did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop shuts the server down.
func (s *Server) Stop() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}
