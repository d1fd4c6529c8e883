package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/auditrail/auditrail/ingest"
)

// The ingest role sets GOGC and a soft memory limit derived from its
// bounds, but leaves either alone when its environment variable is set.
func TestSetGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cfg := ingest.DefaultConfig()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name                 string
		env                  map[string]string
		limit                int64
		wantPercent          int
		wantLimit, presetLim int64
	}{
		{"defaults", nil, 0, defaultGCPercent, cfg.MemoryLimit(), 1 << 40},
		{"flag limit", nil, 300 << 20, defaultGCPercent, 300 << 20, 1 << 40},
		{"GOGC set", map[string]string{"GOGC": "100"}, 0, 100, cfg.MemoryLimit(), 1 << 40},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 0, defaultGCPercent, 1 << 30, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(tc.presetLim)
			setGC(cfg, defaultGCPercent, tc.limit, quiet)
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GOGC %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
