package toolrunner_test

import (
	"errors"
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
		f    func() error
		kind string // "" : want the error f returns
		want error
	}{
		{"nil", func() error { return nil }, "", nil},
		{"error", func() error { return plain }, "", plain},
		{"panic", func() error { panic("boom") }, toolrunner.KindRuntime, nil},
		{"runtime panic", func() error {
			var s []int
			i := -500
			_ = s[i:]
			return nil
		}, toolrunner.KindRuntime, nil},
		{"panic in a goroutine", func() error {
			var g errgroup.Group
			for i := range 4 {
				g.Go(func() error {
					return toolrunner.Safely(func() error {
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
			err := toolrunner.Safely(tc.f)
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
