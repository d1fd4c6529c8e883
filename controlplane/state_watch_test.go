package controlplane

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
)

// syncWriter is a bytes.Buffer that several goroutines write.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A process that stops drains or closes its connection before (or without)
// ending the mirror's context: the watch ends quietly and is not
// re-created, since nothing went wrong.
func TestWatchQuietWhenItsConnectionCloses(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	tests := []struct {
		name  string
		close func(*nats.Conn)
	}{
		{"drain", func(nc *nats.Conn) { _ = nc.Drain() }},
		{"close", func(nc *nats.Conn) { nc.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncWriter
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := DefaultStateConfig()
			cfg.Bucket = "cp_quiet_" + tt.name
			if _, err := OpenState(ctx, js, cfg, log); err != nil {
				t.Fatal(err)
			}
			tt.close(nc)
			testenv.Eventually(t, 10*time.Second, "the connection closed", nc.IsClosed)
			time.Sleep(500 * time.Millisecond) // a re-created watch would have warned by now
			if s := logs.String(); strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR") {
				t.Fatalf("closing the connection logged:\n%s", s)
			}
		})
	}
}
