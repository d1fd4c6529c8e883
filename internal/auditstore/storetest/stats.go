package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

// StatsCase is a stats query of the conformance data, named.
type StatsCase struct {
	Name string
	auditstore.StatsQuery
}

// StatsCases returns the cases of the stats conformance test over the
// events of searchEvents(org, projects, base): every key, every bucket,
// windows aligned on hours and days and ragged ones (so that a store
// that answers whole hours or days from aggregates also reads the ends
// from its rows), each filter and a search, a project. Top is 3 so that
// ties (by value) decide the ranks.
func StatsCases(t *testing.T, org uuid.UUID, projects []uuid.UUID, base time.Time) []StatsCase {
	t.Helper()
	at := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
	day := auditstore.BucketDay
	floorDay := time.UnixMilli(auditstore.FloorTo(base.UnixMilli(), day.Milliseconds())).UTC()
	aligned := func(d time.Duration) *time.Time { v := floorDay.Add(d); return &v }
	parse := func(q string) search.Query {
		sq, err := search.Parse(search.Audit, q)
		if err != nil {
			t.Fatal(err)
		}
		return sq
	}
	action, source, rt := schemas.AuditActionUpdated, schemas.AuditSourceCLI, schemas.ResourceTypeHook
	w := func(since, until *time.Time) auditstore.Window { return auditstore.Window{Since: since, Until: until} }
	q := func(bucket time.Duration, by auditstore.StatsKey, win auditstore.Window) auditstore.StatsQuery {
		return auditstore.StatsQuery{OrgID: org, Bucket: bucket, By: by, Top: 3, Filter: auditstore.Filter{Window: win}}
	}
	cases := []StatsCase{
		{"everything by day", q(day, auditstore.ByAction, w(aligned(-6*day), aligned(day)))},
		{"ragged days by source", q(day, auditstore.BySource, w(at(-100*time.Hour-17*time.Minute), at(time.Second)))},
		{"ragged hours by action", q(time.Hour, auditstore.ByAction, w(at(-40*time.Hour+17*time.Minute), at(-3*time.Hour+5*time.Minute)))},
		{"hours by resource type", q(time.Hour, auditstore.ByResourceType, w(at(-80*time.Hour), at(time.Hour)))},
		{"within one hour", q(time.Hour, auditstore.ByAction, w(at(-50*time.Minute), at(-10*time.Minute)))},
		{"minutes", q(time.Minute, auditstore.ByAction, w(at(-16*time.Hour-7*time.Minute), at(time.Minute)))},
	}
	filtered := []struct {
		name string
		f    func(*auditstore.StatsQuery)
	}{
		{"action filter", func(q *auditstore.StatsQuery) { q.Action = &action }},
		{"source filter", func(q *auditstore.StatsQuery) { q.Source = &source }},
		{"resource_type filter", func(q *auditstore.StatsQuery) { q.ResourceType = &rt; q.By = auditstore.ByResourceType }},
		{"search", func(q *auditstore.StatsQuery) { q.Search = parse(`-actor:key_1 "hook"`) }},
		{"search of a key the aggregates keep", func(q *auditstore.StatsQuery) { q.Search = parse("action:CREATED,DELETED") }},
		{"project", func(q *auditstore.StatsQuery) { q.ProjectID = &projects[0] }},
		{"project and action", func(q *auditstore.StatsQuery) { q.ProjectID = &projects[1]; q.Action = &action }},
	}
	for _, f := range filtered {
		for _, c := range cases[:3] {
			c.Name += ", " + f.name
			f.f(&c.StatsQuery)
			cases = append(cases, c)
		}
	}
	return cases
}

// StatsEvents are the events the stats cases count (searchEvents).
func StatsEvents(org uuid.UUID, projects []uuid.UUID, base time.Time) []schemas.AuditEvent {
	return searchEvents(org, projects, base)
}

// WantStats is the reference answer of q over evs.
func WantStats(evs []schemas.AuditEvent, q auditstore.StatsQuery) auditstore.Stats {
	lo, hi := q.Bounds()
	buckets := map[int64]map[uint8]uint64{}
	actors := map[string]uint64{}
	type res struct {
		rt uint8
		id string
	}
	resources := map[res]uint64{}
	for _, e := range evs {
		ts := e.Timestamp.UnixMilli()
		if !statsKeep(q, lo, hi, e) {
			continue
		}
		var rt uint8
		if e.ResourceType != nil {
			rt = uint8(*e.ResourceType)
		}
		key := map[auditstore.StatsKey]uint8{auditstore.ByAction: uint8(e.Action), auditstore.BySource: uint8(e.Source), auditstore.ByResourceType: rt}[q.By]
		start := auditstore.FloorTo(ts, q.BucketMS())
		if buckets[start] == nil {
			buckets[start] = map[uint8]uint64{}
		}
		buckets[start][key]++
		actors[e.PrincipalID]++
		if e.ResourceID != nil && *e.ResourceID != "" {
			resources[res{rt, *e.ResourceID}]++
		}
	}
	out := auditstore.Stats{Buckets: []auditstore.StatsBucket{}, Actors: []auditstore.TopActor{}, Resources: []auditstore.TopResource{}}
	for _, start := range slices.Sorted(maps.Keys(buckets)) {
		out.Buckets = append(out.Buckets, auditstore.StatsBucket{Start: time.UnixMilli(start).UTC(), Counts: buckets[start]})
	}
	for id, n := range actors {
		out.Actors = append(out.Actors, auditstore.TopActor{PrincipalID: id, Count: n})
	}
	slices.SortFunc(out.Actors, func(a, b auditstore.TopActor) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.PrincipalID, b.PrincipalID))
	})
	for r, n := range resources {
		out.Resources = append(out.Resources, auditstore.TopResource{ResourceType: r.rt, ResourceID: r.id, Count: n})
	}
	slices.SortFunc(out.Resources, func(a, b auditstore.TopResource) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.ResourceID, b.ResourceID), cmp.Compare(a.ResourceType, b.ResourceType))
	})
	out.Actors = out.Actors[:min(q.Top, len(out.Actors))]
	out.Resources = out.Resources[:min(q.Top, len(out.Resources))]
	return out
}

// statsKeep says whether e is counted by q (its window [lo, hi) in ms).
func statsKeep(q auditstore.StatsQuery, lo, hi int64, e schemas.AuditEvent) bool {
	ts := e.Timestamp.UnixMilli()
	keep := e.OrganizationID == q.OrgID && ts >= lo && ts < hi &&
		(q.ProjectID == nil || (e.ProjectID != nil && *e.ProjectID == *q.ProjectID)) &&
		(q.Action == nil || e.Action == *q.Action) && (q.Source == nil || e.Source == *q.Source) &&
		(q.ResourceType == nil || (e.ResourceType != nil && *e.ResourceType == *q.ResourceType))
	for _, term := range q.Search.Terms {
		keep = keep && auditMatch(term, e)
	}
	return keep
}

// WantTopName is the name the stats route gives a top value: among the
// peek newest entries (newest first, ties by event id, descending) that q
// counts and term matches, the first whose name(e) is not "".
func WantTopName(evs []schemas.AuditEvent, q auditstore.StatsQuery, term search.Term, peek int, name func(e schemas.AuditEvent) string) string {
	lo, hi := q.Bounds()
	var hits []schemas.AuditEvent
	for _, e := range evs {
		if statsKeep(q, lo, hi, e) && auditMatch(term, e) {
			hits = append(hits, e)
		}
	}
	slices.SortFunc(hits, func(a, b schemas.AuditEvent) int {
		return cmp.Or(cmp.Compare(b.Timestamp.UnixMilli(), a.Timestamp.UnixMilli()), strings.Compare(b.EventID.String(), a.EventID.String()))
	})
	for _, e := range hits[:min(peek, len(hits))] {
		if n := name(e); n != "" {
			return n
		}
	}
	return ""
}

// EqualStats reports how got differs from want ("" when equal).
func EqualStats(got, want auditstore.Stats) string {
	norm := func(s auditstore.Stats) auditstore.Stats {
		if s.Buckets == nil {
			s.Buckets = []auditstore.StatsBucket{}
		}
		if s.Actors == nil {
			s.Actors = []auditstore.TopActor{}
		}
		if s.Resources == nil {
			s.Resources = []auditstore.TopResource{}
		}
		return s
	}
	got, want = norm(got), norm(want)
	switch {
	case !reflect.DeepEqual(got.Buckets, want.Buckets):
		return fmt.Sprintf("buckets:\n got %v\nwant %v", got.Buckets, want.Buckets)
	case !reflect.DeepEqual(got.Actors, want.Actors):
		return fmt.Sprintf("actors: got %v, want %v", got.Actors, want.Actors)
	case !reflect.DeepEqual(got.Resources, want.Resources):
		return fmt.Sprintf("resources: got %v, want %v", got.Resources, want.Resources)
	}
	return ""
}

func testStats(t *testing.T, open Opener) {
	st := mustOpen(t, open)
	s, ok := st.(auditstore.StatsStore)
	if !ok {
		t.Fatal("the store does not answer stats")
	}
	org, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	base := time.Now().Add(-time.Minute)
	evs := StatsEvents(org, []uuid.UUID{p1, p2}, base)
	write(t, st, evs)
	// Redelivered: stored, and counted, once.
	write(t, st, evs[:20])
	// Another organization's.
	write(t, st, []schemas.AuditEvent{Event(uuid.New(), base)})
	for _, c := range StatsCases(t, org, []uuid.UUID{p1, p2}, base) {
		t.Run(c.Name, func(t *testing.T) {
			want := WantStats(evs, c.StatsQuery)
			if len(want.Buckets) == 0 || len(want.Actors) == 0 {
				t.Fatal("the case counts nothing")
			}
			got, err := s.Stats(ctx(t), c.StatsQuery)
			if err != nil {
				t.Fatal(err)
			}
			if d := EqualStats(got, want); d != "" {
				t.Fatal(d)
			}
		})
	}
	t.Run("empty organization", func(t *testing.T) {
		q := StatsCases(t, uuid.New(), []uuid.UUID{p1, p2}, base)[0].StatsQuery
		got, err := s.Stats(ctx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if d := EqualStats(got, auditstore.Stats{}); d != "" {
			t.Fatal(d)
		}
	})
	since, until := base.Add(-time.Hour), base
	long := base.Add(-1001 * time.Minute)
	invalid := []struct {
		name string
		q    auditstore.StatsQuery
	}{
		{"no since", auditstore.StatsQuery{OrgID: org, Bucket: time.Hour, By: auditstore.ByAction, Top: 3, Filter: auditstore.Filter{Window: auditstore.Window{Until: &until}}}},
		{"since not before until", auditstore.StatsQuery{OrgID: org, Bucket: time.Hour, By: auditstore.ByAction, Top: 3, Filter: auditstore.Filter{Window: auditstore.Window{Since: &until, Until: &since}}}},
		{"too many buckets", auditstore.StatsQuery{OrgID: org, Bucket: time.Minute, By: auditstore.ByAction, Top: 3, Filter: auditstore.Filter{Window: auditstore.Window{Since: &long, Until: &until}}}},
		{"other bucket", auditstore.StatsQuery{OrgID: org, Bucket: 2 * time.Hour, By: auditstore.ByAction, Top: 3, Filter: auditstore.Filter{Window: auditstore.Window{Since: &since, Until: &until}}}},
		{"unknown key", auditstore.StatsQuery{OrgID: org, Bucket: time.Hour, By: "principal_id", Top: 3, Filter: auditstore.Filter{Window: auditstore.Window{Since: &since, Until: &until}}}},
		{"top 0", auditstore.StatsQuery{OrgID: org, Bucket: time.Hour, By: auditstore.ByAction, Filter: auditstore.Filter{Window: auditstore.Window{Since: &since, Until: &until}}}},
	}
	for _, c := range invalid {
		t.Run("invalid: "+c.name, func(t *testing.T) {
			if _, err := s.Stats(ctx(t), c.q); !errors.Is(err, auditstore.ErrInvalidQuery) {
				t.Fatalf("got %v, want ErrInvalidQuery", err)
			}
		})
	}
}
