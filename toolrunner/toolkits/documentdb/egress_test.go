package documentdb

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/toolrunner"
)

// A connection string to the NATS port, the metadata address or a closed
// port: the tool error says only that the database cannot be reached; the
// operator log has the detail. In the default mode no connection is made.
func TestUnreachableDatabaseIsGeneric(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	tests := []struct {
		name  string
		guard *egress.Guard
		uri   string
		log   string // in the operator log
	}{
		{"nats port, strict", egress.Strict(), "mongodb://127.0.0.1:4222/?directConnection=true", "loopback address"},
		{"metadata, dev", egress.AllowLoopback(), "mongodb://169.254.169.254:27017/?directConnection=true", "link-local address"},
		{"mapped loopback, strict", egress.Strict(), "mongodb://[::ffff:127.0.0.1]:4222/?directConnection=true", "loopback address"},
		{"closed port, dev", egress.AllowLoopback(), "mongodb://" + closed + "/?directConnection=true", "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := DefaultConfig()
			cfg.ConnectTimeout, cfg.Egress, cfg.Log = 500*time.Millisecond, tc.guard, slog.New(slog.NewTextHandler(&logs, nil))
			tk := New(cfg)
			defer tk.Close(context.Background())
			var discover toolrunner.Tool
			for _, x := range tk.Tools() {
				if x.Definition().Name == "DiscoverDatabases" {
					discover = x
				}
			}
			_, err := discover.Run(context.Background(), toolrunner.Call{Secrets: map[string]string{SecretName: tc.uri}, Inputs: map[string]any{}})
			te := toolrunner.AsError(err)
			if te == nil || te.Kind != toolrunner.KindUpstream || !strings.Contains(te.Message, "cannot be reached") {
				t.Fatalf("error %v", err)
			}
			for _, leak := range []string{"127.0.0.1", "169.254", "4222", "refused", "loopback", closed} {
				if strings.Contains(te.Message, leak) {
					t.Fatalf("the caller sees %q: %s", leak, te.Message)
				}
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Fatalf("operator log lacks %q: %s", tc.log, logs.String())
			}
		})
	}
}
