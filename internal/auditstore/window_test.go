package auditstore

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestWindowBounds(t *testing.T) {
	at := func(ns int64) *time.Time { v := time.Unix(0, ns).UTC(); return &v }
	for _, tc := range []struct {
		name   string
		w      Window
		lo, hi int64
	}{
		{"open", Window{}, math.MinInt64, math.MaxInt64},
		{"whole milliseconds", Window{Since: at(5_000_000), Until: at(9_000_000)}, 5, 9},
		// a stored 5 ms is before a since of 5.5 ms; a stored 9 ms is before an until of 8.5 ms
		{"between milliseconds round up", Window{Since: at(5_500_000), Until: at(8_500_000)}, 6, 9},
		{"before 1970", Window{Since: at(-1_500_000)}, -1, math.MaxInt64},
	} {
		lo, hi := tc.w.Bounds()
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: Bounds() = %d, %d; want %d, %d", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
	since, until := time.Now(), time.Now().Add(-time.Second)
	q := Query{OrgID: uuid.New(), Limit: 1, Filter: Filter{Window: Window{Since: &since, Until: &until}}}
	if err := q.Validate(); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("since after until: %v", err)
	}
	if err := (ExecQuery{OrgID: q.OrgID, Limit: 1, Window: Window{Since: &since, Until: &since}}).Validate(); !errors.Is(err, ErrInvalidQuery) {
		t.Fatalf("executions, since = until: %v", err)
	}
}
