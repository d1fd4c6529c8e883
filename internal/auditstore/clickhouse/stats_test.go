package clickhouse

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// The stats answered from the aggregates (whole hours and days) plus the
// ragged ends from audit_logs equal the stats read from audit_logs alone
// and the reference, case by case; the aggregates are really read (a row
// added to an aggregate alone changes the answer of the aggregate path
// only); and the cases do take the aggregate path.
func TestStatsAggregatesAgreeWithRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org, projects := uuid.New(), []uuid.UUID{uuid.New(), uuid.New()}
	base := time.Now().Add(-time.Minute)
	evs := storetest.StatsEvents(org, projects, base)
	// Two inserts, so that the aggregates hold several parts per key
	// until a merge sums them: readers must sum, not take a row.
	if err := s.WriteAudit(ctx, evs[:70]); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteAudit(ctx, evs[70:]); err != nil {
		t.Fatal(err)
	}
	used, subtracted := map[string]int{}, map[string]int{}
	cases := storetest.StatsCases(t, org, projects, base)
	// Each ragged end read both ways: its own rows, or its whole step of
	// the aggregate minus the rest of the step; and as the planner picks.
	choices := map[string]complement{"planned": fewer, "rows": func(int64, int64) bool { return false }, "step minus the rest": func(int64, int64) bool { return true }}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			raw, err := s.stats(ctx, c.StatsQuery, false, fewer)
			if err != nil {
				t.Fatal(err)
			}
			if d := storetest.EqualStats(raw, storetest.WantStats(evs, c.StatsQuery)); d != "" {
				t.Fatalf("raw rows vs reference: %s", d)
			}
			for how, comp := range choices {
				bs, as, rs := statsPlan(c.StatsQuery, true, time.Now().UnixMilli(), comp)
				for name, sp := range map[string]span{"buckets": bs, "actors": as, "resources": rs} {
					if sp.agg {
						used[name]++
					}
					if sp.left.neg || sp.right.neg {
						subtracted[name]++
					}
				}
				agg, err := s.stats(ctx, c.StatsQuery, true, comp)
				if err != nil {
					t.Fatal(err)
				}
				if d := storetest.EqualStats(agg, raw); d != "" {
					t.Fatalf("aggregate path (ragged ends: %s) vs raw rows: %s", how, d)
				}
			}
		})
	}
	for _, part := range []string{"buckets", "actors", "resources"} {
		if used[part] < 2 || subtracted[part] < 2 {
			t.Errorf("%s: of %d cases, %d take the aggregate path and %d subtract a ragged end", part, len(cases)*len(choices), used[part], subtracted[part])
		}
	}

	t.Run("the aggregate is read", func(t *testing.T) {
		q := cases[0].StatsQuery // every day of the data, no filter
		if bs, as, rs := statsPlan(q, true, time.Now().UnixMilli(), fewer); !bs.agg || !as.agg || !rs.agg {
			t.Fatalf("%s does not take the aggregate path: %v %v %v", cases[0].Name, bs, as, rs)
		}
		before, err := s.stats(ctx, q, true, fewer)
		if err != nil {
			t.Fatal(err)
		}
		hour := auditstore.FloorTo(base.Add(-2*time.Hour).UnixMilli(), hourMS)
		day := auditstore.FloorTo(hour, dayMS)
		for _, ins := range []struct {
			stmt string
			args []any
		}{
			{`INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)`,
				[]any{org.String(), uint8(0), "", hour, "", uint8(1), uint8(1), uint8(0), uint64(1000)}},
			{`INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)`,
				[]any{org.String(), uint8(1), "", day, "planted", uint8(1), uint8(1), uint8(0), uint64(1000)}},
			{`INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)`,
				[]any{org.String(), uint8(2), "", day, "planted", uint8(0), uint8(0), uint8(0), uint64(1000)}},
		} {
			b, err := s.conn.PrepareBatch(ctx, ins.stmt)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Append(ins.args...); err != nil {
				t.Fatal(err)
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		}
		after, err := s.stats(ctx, q, true, fewer)
		if err != nil {
			t.Fatal(err)
		}
		var planted uint64
		for _, b := range after.Buckets {
			planted += b.Counts[1]
		}
		for _, b := range before.Buckets {
			planted -= b.Counts[1]
		}
		if planted != 1000 || len(after.Actors) == 0 || after.Actors[0].PrincipalID != "planted" ||
			len(after.Resources) == 0 || after.Resources[0].ResourceID != "planted" {
			t.Fatalf("a row planted in the aggregates is not counted: %d more, actors %v, resources %v", planted, after.Actors, after.Resources)
		}
		raw, err := s.stats(ctx, q, false, fewer)
		if err != nil {
			t.Fatal(err)
		}
		if storetest.EqualStats(raw, after) == "" {
			t.Fatal("the raw path counts the planted aggregate rows")
		}
	})
}

// A database holding entries before 0007 counts them after the migration
// (the backfill), on the aggregate path, and entries written after it once
// (the views, no second backfill on reopening).
func TestStatsBackfillsStoredRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.ClickHouse(t)
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, `CREATE TABLE schema_migrations (name String, applied_ms Int64) ENGINE = MergeTree ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	record, err := conn.PrepareBatch(ctx, `INSERT INTO schema_migrations (name, applied_ms)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name >= "0007" {
			break
		}
		for _, stmt := range m.Statements {
			if err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
		}
		if err := record.Append(m.Name, int64(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := record.Send(); err != nil {
		t.Fatal(err)
	}
	org, projects := uuid.New(), []uuid.UUID{uuid.New(), uuid.New()}
	base := time.Now().Add(-time.Minute)
	evs := storetest.StatsEvents(org, projects, base)
	old, err := conn.PrepareBatch(ctx, `INSERT INTO audit_logs (organization_id, ts_ms, event_id, id, action, source, display_name,
		project_id, principal_id, principal_type, resource_type, resource_id, created_ms, ver)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[:100] {
		var project *string
		if e.ProjectID != nil {
			p := e.ProjectID.String()
			project = &p
		}
		var rt *uint8
		if e.ResourceType != nil {
			v := uint8(*e.ResourceType)
			rt = &v
		}
		if err := old.Append(org.String(), e.Timestamp.UnixMilli(), e.EventID.String(), schemas.EntryID(e.EventID).String(),
			uint8(e.Action), uint8(e.Source), e.DisplayName, project, e.PrincipalID, e.PrincipalType, rt, e.ResourceID,
			e.Timestamp.UnixMilli(), uint64(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Send(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteAudit(ctx, evs[100:]); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, dsn) // reopening backfills nothing again
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	cases := storetest.StatsCases(t, org, projects, base)
	for _, c := range cases[:4] {
		if bs, as, rs := statsPlan(c.StatsQuery, true, time.Now().UnixMilli(), fewer); !bs.agg || !as.agg {
			t.Fatalf("%s: not the aggregate path (%v %v %v)", c.Name, bs, as, rs)
		}
		got, err := s2.Stats(ctx, c.StatsQuery)
		if err != nil {
			t.Fatal(err)
		}
		if d := storetest.EqualStats(got, storetest.WantStats(evs, c.StatsQuery)); d != "" {
			t.Fatalf("%s: %s", c.Name, d)
		}
	}
}

// Stats over 30 days read the aggregates and, of audit_logs, only the
// ragged ends of the window (counted from the server's progress packets),
// where the raw path reads every row of the window in each of its three
// queries. This is what keeps 30 days of a large tenant fast. The bounds
// leave room for whole granules (8192 rows) around each range of these
// small tables, and fail when any one query reads the whole window: a
// filter on action leaves only the top resources to audit_logs.
func TestStatsReadFewRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Open(ctx, testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org, project := uuid.New(), uuid.New()
	const total = 300_000
	now := time.Now()
	step := 30 * 24 * time.Hour / total
	evs := make([]schemas.AuditEvent, 0, total)
	for i := range total {
		e := storetest.Event(org, now.Add(-time.Duration(i)*step))
		e.Action, e.Source = schemas.AuditAction(1+i%4), schemas.AuditSource(1+i%3)
		e.PrincipalID = fmt.Sprintf("key_%d", i%8)
		rt := schemas.ResourceType(1 + i%3)
		e.ResourceType, e.ResourceID = &rt, ptr(fmt.Sprintf("res-%d", i%40))
		if i%2 == 0 {
			e.ProjectID = &project
		}
		evs = append(evs, e)
	}
	if err := s.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	today := now.UTC().Truncate(day)
	at := func(t time.Time) *time.Time { return &t }
	cdt := schemas.AuditActionCreated
	for _, c := range []struct {
		name         string
		since, until *time.Time
		bucket       time.Duration
		project      *uuid.UUID
		action       *schemas.AuditAction
		most         uint64 // rows read at most on the aggregate path
	}{
		{"whole days", at(today.Add(-29 * day)), at(today), day, nil, nil, total / 3},
		{"last 30 days", at(now.Add(-30 * day)), at(now), time.Hour, nil, nil, total / 3},
		{"a project's last 30 days, one action", at(now.Add(-30 * day)), at(now), day, &project, &cdt, total + total/3},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := auditstore.StatsQuery{OrgID: org, ProjectID: c.project, Bucket: c.bucket, By: auditstore.ByAction, Top: 10,
				Filter: auditstore.Filter{Action: c.action, Window: auditstore.Window{Since: c.since, Until: c.until}}}
			read := func(allowAgg bool) (uint64, auditstore.Stats) {
				var rows atomic.Uint64
				st, err := s.stats(ch.Context(ctx, ch.WithProgress(func(p *ch.Progress) { rows.Add(p.Rows) })), q, allowAgg, fewer)
				if err != nil {
					t.Fatal(err)
				}
				return rows.Load(), st
			}
			aggRows, agg := read(true)
			rawRows, raw := read(false)
			if d := storetest.EqualStats(agg, raw); d != "" {
				t.Fatal(d)
			}
			if aggRows == 0 || aggRows > c.most || rawRows < 2*total {
				t.Fatalf("read %d rows from the aggregates and the ends (at most %d), %d from audit_logs alone, of %d", aggRows, c.most, rawRows, total)
			}
			t.Logf("rows read: %d (aggregates), %d (audit_logs alone)", aggRows, rawRows)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The planner reads each ragged end of a window the cheaper way: its own
// rows, or its whole step minus the rest of the step; time after now
// counts as no rows.
func TestStatsPlanTakesTheCheaperSide(t *testing.T) {
	day := 24 * time.Hour
	d0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	now := d0.Add(15 * time.Hour)
	raw := func(since, until time.Time) span { return rawOnly(ms(since), ms(until)) }
	for _, c := range []struct {
		name         string
		since, until time.Time
		usable       bool
		want         span
	}{
		{"30 days ending now at 15:00: the first day's 9 h read, today's step minus the 9 h after now", now.Add(-30 * day), now, true,
			span{agg: true, lo: ms(d0.Add(-29 * day)), hi: ms(d0.Add(day)),
				left: rng{lo: ms(now.Add(-30 * day)), hi: ms(d0.Add(-29 * day))}, right: rng{lo: ms(now), hi: ms(d0.Add(day)), neg: true}}},
		{"since 03:00: the first day's step minus its 3 h", d0.Add(-10*day + 3*time.Hour), d0, true,
			span{agg: true, lo: ms(d0.Add(-10 * day)), hi: ms(d0), left: rng{lo: ms(d0.Add(-10 * day)), hi: ms(d0.Add(-10*day + 3*time.Hour)), neg: true}, right: rng{lo: ms(d0), hi: ms(d0)}}},
		{"today so far from 02:00: the day minus 02:00 and after now", d0.Add(2 * time.Hour), now, true,
			span{agg: true, lo: ms(d0), hi: ms(d0.Add(day)), left: rng{lo: ms(d0), hi: ms(d0.Add(2 * time.Hour)), neg: true}, right: rng{lo: ms(now), hi: ms(d0.Add(day)), neg: true}}},
		{"4 h of yesterday: read", d0.Add(-14 * time.Hour), d0.Add(-10 * time.Hour), true, raw(d0.Add(-14*time.Hour), d0.Add(-10*time.Hour))},
		{"no aggregate for this query", now.Add(-30 * day), now, false, raw(now.Add(-30*day), now)},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := auditstore.StatsQuery{Filter: auditstore.Filter{Window: auditstore.Window{Since: &c.since, Until: &c.until}}}
			if got := aggSpan(q, dayMS, c.usable, ms(now), fewer); got != c.want {
				t.Fatalf("plan\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
