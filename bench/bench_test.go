//go:build e2e

package bench

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func TestFigure(t *testing.T) {
	tests := []struct {
		f    Figure
		want bool
	}{
		{Figure{Value: 60, Reference: 100, Goal: 0.5}, true},
		{Figure{Value: 40, Reference: 100, Goal: 0.5}, false},
		{Figure{Value: 1.2, Reference: 1, Goal: 1.15, Lower: true}, false},
		{Figure{Value: 1.1, Reference: 1, Goal: 1.15, Lower: true}, true},
		{Figure{Value: 25, Reference: 100, Goal: 5, Lower: true, Max: 30}, true},
		{Figure{Value: 31, Reference: 100, Goal: 5, Lower: true, Max: 30}, false},
		{Figure{Value: 150e3, Reference: 300e3, Goal: 0.1, Min: 100e3}, true},
		{Figure{Value: 90e3, Reference: 300e3, Goal: 0.1, Min: 100e3}, false},
	}
	for _, tc := range tests {
		if tc.f.Met() != tc.want {
			t.Errorf("%+v: Met = %v", tc.f, !tc.want)
		}
	}
}

// The executions benchmark works end to end on a small tenant: data
// generated on the server, every page full through the API, figures set.
func TestQueryExecutionsBenchmarkRuns(t *testing.T) {
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	defer func(n int) { pageSamples = n }(pageSamples)
	pageSamples = 5
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := QueryExecutions(ctx, 10_000, io.Discard) // 10 users: user_7 holds pages
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Fatalf("%d scenarios, want 6", len(rs))
	}
	for _, r := range rs {
		if r.Items != benchPage || r.API.P50 <= 0 || r.RawBounded.P50 <= 0 || r.RawNaive.P50 <= 0 {
			t.Fatalf("%s: %+v", r.Name, r)
		}
	}
	if figs := QueryFigures("executions ", rs); len(figs) != 12 || figs[0].Value <= 0 {
		t.Fatalf("figures: %+v", figs)
	}
}

// The SQLite benchmark works end to end on a small tenant.
func TestSQLiteBenchmarkRuns(t *testing.T) {
	defer func(n int) { pageSamples = n }(pageSamples)
	pageSamples = 5
	r, err := SQLite(context.Background(), 2_000, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	figs := r.Figures()
	if len(figs) != 2 || figs[0].Value <= 0 || figs[0].Reference <= 0 || figs[1].Value <= 0 {
		t.Fatalf("figures: %+v", figs)
	}
}

// The connections benchmark works end to end on a short run: a real
// control plane holds the connection, both figures are measured.
func TestConnectionsBenchmarkRuns(t *testing.T) {
	defer func(n int) { connectionSamples = n }(connectionSamples)
	connectionSamples = 300
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	figs, err := ConnectionFigures(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 1 || figs[0].Value <= 0 || figs[0].Reference <= 0 || figs[0].Goal <= 1 || !figs[0].Lower {
		t.Fatalf("figures: %+v", figs)
	}
	// The goal is the reference plus 50 µs.
	if got := (figs[0].Goal - 1) * figs[0].Reference; got < 49.9 || got > 50.1 {
		t.Fatalf("goal is the reference + %.1f µs", got)
	}
}

// countRecords counts CSV records, not lines, across any split of the body.
func TestCountRecords(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int
	}{
		{"plain", "a,b\r\n1,2\r\n", 2},
		{"quoted line break", "a,b\r\n\"x\ny\",2\r\n", 2},
		{"doubled quotes", "a\r\n\"{\"\"k\"\":\"\"v\nw\"\"}\"\r\n3\r\n", 3},
		{"no final break", "a\r\nb", 1},
		{"empty", "", 0},
	}
	for _, tc := range tests {
		for split := 0; split <= len(tc.body); split++ {
			rows, inQuote := countRecords([]byte(tc.body[:split]), 0, false)
			rows, inQuote = countRecords([]byte(tc.body[split:]), rows, inQuote)
			if rows != tc.want || inQuote {
				t.Fatalf("%s split at %d: %d records (in quotes %v), want %d", tc.name, split, rows, inQuote, tc.want)
			}
		}
	}
}
