package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestDo(t *testing.T) {
	fast := Policy{Initial: time.Millisecond, Max: 4 * time.Millisecond}
	boom := errors.New("boom")
	tests := []struct {
		name      string
		policy    Policy
		failFirst int // attempts that fail before success (-1: always)
		permanent bool
		wantCalls int
		wantErr   error
	}{
		{"first try", fast, 0, false, 1, nil},
		{"succeeds after failures", fast, 3, false, 4, nil},
		{"max attempts", Policy{Initial: time.Millisecond, Max: time.Millisecond, MaxAttempts: 3}, -1, false, 3, boom},
		{"permanent stops at once", fast, -1, true, 1, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, notified := 0, 0
			err := Do(context.Background(), tt.policy, func(context.Context) error {
				calls++
				if tt.failFirst < 0 || calls <= tt.failFirst {
					if tt.permanent {
						return Permanent(boom)
					}
					return boom
				}
				return nil
			}, func(error, time.Duration) { notified++ })
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.permanent && err != boom {
				t.Fatalf("permanent error not unwrapped: %#v", err)
			}
			if calls != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == nil && notified != calls-1 {
				t.Fatalf("notified %d times for %d calls", notified, calls)
			}
		})
	}
}

func TestDoStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := Do(ctx, Policy{Initial: 5 * time.Millisecond, Max: 5 * time.Millisecond}, func(context.Context) error { return errors.New("down") }, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

func TestBackoffCapsAndJitter(t *testing.T) {
	b := Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: 0.5}.Backoff()
	for i := 0; i < 20; i++ {
		d := b.NextBackOff()
		if d < 5*time.Millisecond || d > 60*time.Millisecond {
			t.Fatalf("wait %d = %v outside the jittered bounds", i, d)
		}
	}
	nb := Policy{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: -1}.Backoff()
	want := []time.Duration{10, 20, 40, 40}
	for i, w := range want {
		if d := nb.NextBackOff(); d != w*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v", i, d, w*time.Millisecond)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Policy{{}, {Initial: time.Second, Max: time.Millisecond}, {Initial: 1, Max: 1, Multiplier: 0.5}, {Initial: 1, Max: 1, Jitter: 2}, {Initial: 1, Max: 1, MaxAttempts: -1}} {
		if err := p.Validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Fatalf("%+v: err = %v", p, err)
		}
	}
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
