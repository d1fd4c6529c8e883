package main

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/backend"
)

type fakeConsumer struct{ ready bool }

func (f fakeConsumer) Ready() bool         { return f.ready }
func (f fakeConsumer) Stats() ingest.Stats { return ingest.Stats{Received: 1} }

// healthKey is the one scheme of /healthz keys: lower-case words joined by
// underscores, no numbers.
var healthKey = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

// The readiness check and the counters of a consumer share one key, which
// says what it consumes.
func TestHealthKeysAgree(t *testing.T) {
	tests := []struct {
		name       string
		cs         consumers
		wantChecks []string
	}{
		{"ingest and dev", ingestConsumers(fakeConsumer{true}, fakeConsumer{false}),
			[]string{"ingest_audit", "ingest_executions", "nats", "store"}},
		{"query", nil, []string{"nats", "store"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var store auditstore.Store = backend.NewPending()
			checks := append([]check{natsCheck(map[string]*nats.Conn{}), {healthStore, store.Ping}}, consumerChecks(tt.cs)...)
			var names []string
			for _, c := range checks {
				names = append(names, c.name)
				if !healthKey.MatchString(c.name) {
					t.Errorf("check %q does not follow the scheme", c.name)
				}
			}
			sort.Strings(names)
			if !slices.Equal(names, tt.wantChecks) {
				t.Errorf("checks %v, want %v", names, tt.wantChecks)
			}
			counters := tt.cs.counters(map[string]any{})
			for _, c := range checks {
				if c.name == healthNATS || c.name == healthStore {
					continue
				}
				if _, ok := counters[c.name]; !ok {
					t.Errorf("check %q has no counters under its name (counters: %v)", c.name, counters)
				}
				err := c.fn(context.Background())
				if want := c.name == healthIngestAudit; (err == nil) != want {
					t.Errorf("check %q: %v", c.name, err)
				}
			}
		})
	}
}
