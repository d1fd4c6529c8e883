package clickhouse

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// pageByHours over an in-memory listing: it returns exactly the page that
// a full scan returns, and sparse filters cost few rounds (windows sized by
// the matches seen, not a slow fixed growth from one page of events).
func TestPageByHours(t *testing.T) {
	const hour = int64(3_600_000)
	type ev struct{ ts, id int64 }
	tests := []struct {
		name      string
		perHour   int
		hours     int
		every     int // keep every n-th event
		after     int // cursor at this index of the listing, -1: none
		limit     int
		maxRounds int
	}{
		{"newest page", 1000, 200, 1, -1, 50, 1},
		{"deep page", 1000, 200, 1, 120_000, 50, 1},
		{"sparse filter", 1000, 200, 1000, -1, 50, 3},
		{"rare filter", 1000, 200, 40_000, -1, 3, 4},
		{"one match", 100, 50, 1 << 30, -1, 10, 5},
		{"everything fits", 10, 5, 1, -1, 1000, 1},
	}
	for _, tc := range tests {
		for _, within := range []bool{false, true} {
			name := tc.name
			if within {
				if tc.every != 1 {
					continue // a filtered listing's windows are whole hours
				}
				name += " within hours"
			}
			t.Run(name, func(t *testing.T) {
				// The listing, newest first, and its hourly counts.
				var all []ev
				var hours []hourCount
				for h := tc.hours - 1; h >= 0; h-- {
					hours = append(hours, hourCount{hour: int64(h) * hour, n: uint64(tc.perHour)})
					for i := 0; i < tc.perHour; i++ {
						all = append(all, ev{ts: int64(h)*hour + hour - 1 - int64(i)*(hour/int64(tc.perHour)), id: int64(len(all))})
					}
				}
				keep := func(i int) bool { return i%tc.every == 0 }
				var after *auditstore.Key
				start := 0
				if tc.after >= 0 {
					after = &auditstore.Key{Timestamp: time.UnixMilli(all[tc.after].ts), EventID: uuid.Nil}
					start = tc.after + 1
				}
				var want []int64
				for i := start; i < len(all) && len(want) < tc.limit; i++ {
					if keep(i) {
						want = append(want, all[i].id)
					}
				}
				span := hourSpan{hours: hours}
				if within {
					span.asOf = all[0].ts + 1 // the counts read after the newest event
				}
				rounds, scanned := 0, 0
				got, more, err := pageByHours(span, after, auditstore.Window{}, tc.limit, func(lo, hi int64, limit int) ([]int64, error) {
					rounds++
					var out []int64
					for i := start; i < len(all); i++ {
						if all[i].ts >= lo && all[i].ts < hi {
							scanned++
							if keep(i) && len(out) < limit {
								out = append(out, all[i].id)
							}
						}
					}
					return out, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %d items %v…, want %d", len(got), got[:min(5, len(got))], len(want))
				}
				total := 0
				for i := start; i < len(all); i++ {
					if keep(i) {
						total++
					}
				}
				if more != (total > tc.limit) {
					t.Fatalf("has_more %v with %d matches for a page of %d", more, total, tc.limit)
				}
				if rounds > tc.maxRounds {
					t.Fatalf("%d rounds, want at most %d", rounds, tc.maxRounds)
				}
				// Within hours, a window holds about the margin times
				// what the page needs, not the hour.
				if most := (windowMargin + 1) * (tc.limit + 1); within && tc.perHour > most && scanned > most {
					t.Fatalf("%d rows scanned for a page of %d, want at most %d", scanned, tc.limit, most)
				}
			})
		}
	}
}

// since and until narrow the scanned hours: no window reaches outside
// them, and a window that leaves the page short at since ends the scan.
func TestPageByHoursWindow(t *testing.T) {
	const hour = int64(3_600_000)
	var hours []hourCount
	var all []int64 // timestamps, newest first: one event per minute
	for h := int64(99); h >= 0; h-- {
		hours = append(hours, hourCount{hour: h * hour, n: 60})
		for m := int64(59); m >= 0; m-- {
			all = append(all, h*hour+m*60_000)
		}
	}
	since, until := time.UnixMilli(40*hour+30*60_000), time.UnixMilli(41*hour)
	rounds := 0
	got, more, err := pageByHours(hourSpan{hours: hours, asOf: all[0] + 1}, nil, auditstore.Window{Since: &since, Until: &until}, 100, func(lo, hi int64, limit int) ([]int64, error) {
		rounds++
		if lo < since.UnixMilli() || hi > until.UnixMilli() {
			t.Fatalf("window [%d, %d) outside [%d, %d)", lo, hi, since.UnixMilli(), until.UnixMilli())
		}
		var out []int64
		for _, ts := range all {
			if ts >= lo && ts < hi && len(out) < limit {
				out = append(out, ts)
			}
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 || more || got[0] != 40*hour+59*60_000 || got[29] != since.UnixMilli() {
		t.Fatalf("got %d items (more %v), want the 30 minutes of [since, until)", len(got), more)
	}
	if rounds != 1 {
		t.Fatalf("%d rounds, want 1", rounds)
	}
}

// An export walks a tenant page by page: each page is read in one window
// that holds about what it needs. Counting the cursor's hour as whole made
// each page read the rest of that hour, find it short and then read three
// more hours: 1.7 windows and 6 rows scanned per row returned.
func TestExportPagesScanLittle(t *testing.T) {
	const hour, perHour, hoursN, limit = int64(3_600_000), 13_889, 72, 10_000
	var hours []hourCount
	var all []int64 // timestamps, newest first, evenly spread in each hour
	for h := int64(hoursN - 1); h >= 0; h-- {
		hours = append(hours, hourCount{hour: h * hour, n: perHour})
		for i := int64(0); i < perHour; i++ {
			all = append(all, h*hour+hour-1-i*hour/perHour)
		}
	}
	var after *auditstore.Key
	start, pages, windows, scanned := 0, 0, 0, 0
	for {
		got, more, err := pageByHours(hourSpan{hours: hours, asOf: all[0] + 1}, after, auditstore.Window{}, limit, func(lo, hi int64, n int) ([]int, error) {
			windows++
			var out []int
			for i := start; i < len(all); i++ {
				if all[i] >= lo && all[i] < hi {
					scanned++
					if len(out) < n {
						out = append(out, i)
					}
				}
			}
			return out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[0] != start {
			t.Fatalf("page %d starts at %v, want %d", pages, got[:min(1, len(got))], start)
		}
		pages++
		start = got[len(got)-1] + 1
		if !more {
			break
		}
		// Timestamps are distinct here, so the cursor's event id plays no part.
		after = &auditstore.Key{Timestamp: time.UnixMilli(all[start-1]), EventID: uuid.Nil}
	}
	if start != len(all) {
		t.Fatalf("the pages ended at %d of %d events", start, len(all))
	}
	if max := pages + pages/20; windows > max {
		t.Errorf("%d windows for %d pages, want at most %d", windows, pages, max)
	}
	if perRow := float64(scanned) / float64(len(all)); perRow > 2 {
		t.Errorf("%.1f rows scanned per row returned, want at most 2", perRow)
	}
}

// The newest hour of a busy tenant, read a quarter of the way through it
// (its entries lie before asOf, not spread over the whole hour), and a
// burst at its start that the even spread misplaces: each newest page is
// the full scan's, the first from one small window, the burst's from a
// small window found empty and then the rest of the hour.
func TestPageWithinTheNewestHour(t *testing.T) {
	const hour = int64(3_600_000)
	const limit = 50
	tests := []struct {
		name         string
		ts           func(i int) int64 // the i-th newest entry's time, in hour 10
		asOf         int64
		rounds, most int
	}{
		{"even, a quarter through", func(i int) int64 { return 10*hour + hour/4 - 1 - int64(i)*9 }, 10*hour + hour/4, 1, (windowMargin + 1) * (limit + 1)},
		{"a burst at the hour's start", func(i int) int64 { return 10*hour + 60_000 - 1 - int64(i)/2 }, 10*hour + hour/2, 2, 101_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n = 100_000
			all := make([]int64, n) // newest first
			for i := range all {
				all[i] = tc.ts(i)
			}
			hours := []hourCount{{hour: 10 * hour, n: n}, {hour: 9 * hour, n: 1000}}
			rounds, scanned := 0, 0
			got, more, err := pageByHours(hourSpan{hours: hours, asOf: tc.asOf}, nil, auditstore.Window{}, limit, func(lo, hi int64, k int) ([]int64, error) {
				rounds++
				var out []int64
				for _, ts := range all {
					if ts >= lo && ts < hi {
						scanned++
						if len(out) < k {
							out = append(out, ts)
						}
					}
				}
				return out, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !more || !slices.Equal(got, all[:limit]) {
				t.Fatalf("got %d items (more %v) from %v, want the newest %d from %d", len(got), more, got[:min(1, len(got))], limit, all[0])
			}
			if rounds > tc.rounds || scanned > tc.most {
				t.Fatalf("%d rounds scanning %d rows, want at most %d and %d", rounds, scanned, tc.rounds, tc.most)
			}
		})
	}
}
