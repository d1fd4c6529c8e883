package clickhouse

import (
	"testing"
	"time"
)

// byPartition keeps every index exactly once, in groups of at most maxParts
// months each, and one group when the batch already fits.
func TestByPartition(t *testing.T) {
	start := time.Date(2001, 3, 15, 23, 59, 0, 0, time.UTC)
	for _, tc := range []struct{ months, perMonth, max, groups int }{
		{1, 5, 99, 1}, {99, 2, 99, 1}, {100, 1, 99, 2}, {150, 3, 99, 2}, {300, 1, 99, 4}, {7, 1, 2, 4},
	} {
		var ts []int64
		for m := 0; m < tc.months; m++ {
			for k := 0; k < tc.perMonth; k++ {
				ts = append(ts, start.AddDate(0, m, -k).UnixMilli())
			}
		}
		// Interleave months so that a group is not just a slice of the input.
		for i, j := 0, len(ts)-1; i < j; i, j = i+2, j-2 {
			ts[i], ts[j] = ts[j], ts[i]
		}
		groups := byPartition(len(ts), func(i int) int64 { return ts[i] }, tc.max)
		if len(groups) != tc.groups {
			t.Fatalf("%+v: %d groups", tc, len(groups))
		}
		seen := map[int]bool{}
		for _, g := range groups {
			months := map[string]bool{}
			for _, i := range g {
				if seen[i] {
					t.Fatalf("%+v: index %d twice", tc, i)
				}
				seen[i] = true
				months[time.UnixMilli(ts[i]).UTC().Format("2006-01")] = true
			}
			if len(months) > tc.max {
				t.Fatalf("%+v: a group spans %d months", tc, len(months))
			}
		}
		if len(seen) != len(ts) {
			t.Fatalf("%+v: %d of %d indices", tc, len(seen), len(ts))
		}
	}
}
