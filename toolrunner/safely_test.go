package toolrunner_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/auditrail/auditrail/toolrunner"
)

// TestSafely: a panic in tool code, in the runner's goroutine or in one
// the tool starts, is a runtime error of the call; other results pass
// through unchanged.
func TestSafely(t *testing.T) {
	plain := errors.New("plain")
	tests := []struct {
		name string
		f    func(log *slog.Logger) error
		kind string // "" : want the error f returns
		want error
	}{
		{"nil", func(*slog.Logger) error { return nil }, "", nil},
		{"error", func(*slog.Logger) error { return plain }, "", plain},
		{"panic", func(*slog.Logger) error { panic("boom") }, toolrunner.KindRuntime, nil},
		{"runtime panic", func(*slog.Logger) error {
			var s []int
			i := -500
			_ = s[i:]
			return nil
		}, toolrunner.KindRuntime, nil},
		{"panic in a goroutine", func(log *slog.Logger) error {
			var g errgroup.Group
			for i := range 4 {
				g.Go(func() error {
					return toolrunner.Safely(log, func() error {
						if i == 2 {
							panic("boom in goroutine")
						}
						return nil
					})
				})
			}
			return g.Wait()
		}, toolrunner.KindRuntime, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, nil))
			err := toolrunner.Safely(log, func() error { return tc.f(log) })
			if panicked := strings.Contains(logged.String(), "tool panicked"); panicked != (tc.kind != "") {
				t.Errorf("logged %q", logged.String())
			}
			if tc.kind == "" {
				if err != tc.want {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				return
			}
			var te *toolrunner.Error
			if !errors.As(err, &te) || te.Kind != tc.kind || te.CanRetry {
				t.Fatalf("err = %#v, want a %s error", err, tc.kind)
			}
		})
	}
}
