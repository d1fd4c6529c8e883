package clickhouse

import (
	"context"
	_ "embed"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/auditrail/auditrail/internal/auditstore"
)

//go:embed queries/stats.sql
var statsTemplate string

var statsSQL = listTemplate("stats.sql", statsTemplate)

// statsKeys are the columns of the counts' key: in audit_logs and in
// audit_stats (where no resource type is 0).
var statsKeys = map[auditstore.StatsKey][2]string{
	auditstore.ByAction:       {"action", "action"},
	auditstore.BySource:       {"source", "source"},
	auditstore.ByResourceType: {"ifNull(resource_type, 0)", "resource_type"},
}

// Granularities of the aggregates (0007_audit_stats.sql), in ms.
const (
	hourMS = int64(3_600_000)
	dayMS  = 24 * hourMS
)

// statsData is what a stats query renders from.
type statsData struct {
	Agg                                   bool
	Bucket                                int64
	Key, AggKey                           string
	Project, Action, Source, ResourceType bool
	Terms                                 []chTerm
}

// span is the part of a window that an aggregate of granularity step
// answers, [lo, hi); the rest of the window, [since, lo) and [hi, until),
// is read from audit_logs. Without an aggregate part lo = hi = until.
type span struct {
	agg    bool
	lo, hi int64
}

// aggSpan returns the whole steps of q's window, when usable.
func aggSpan(q auditstore.StatsQuery, step int64, usable bool) span {
	since, until := q.Bounds()
	lo, hi := auditstore.CeilTo(since, step), auditstore.FloorTo(until, step)
	if !usable || lo >= hi {
		return span{lo: until, hi: until}
	}
	return span{agg: true, lo: lo, hi: hi}
}

// statsPlan says which parts of the three stats queries come from the
// aggregates. allowAgg false reads every part from audit_logs (tests
// compare both). None keeps what a search tests, so a search reads
// audit_logs; the counts' and the actors' aggregates keep action, source and
// resource type, so they serve filters on them (the counts only for hours
// and days, not minutes); the resources' aggregate keeps the resource type
// only.
func statsPlan(q auditstore.StatsQuery, allowAgg bool) (buckets, actors, resources span) {
	plain := allowAgg && q.Search.Empty()
	buckets = aggSpan(q, hourMS, plain && q.Bucket >= auditstore.BucketHour)
	actors = aggSpan(q, dayMS, plain)
	resources = aggSpan(q, dayMS, plain && q.Action == nil && q.Source == nil)
	return buckets, actors, resources
}

var _ auditstore.StatsStore = (*Store)(nil)

// Stats implements auditstore.StatsStore: the whole hours (days, for the
// tops) of the window from the aggregates of 0007 where the
// filters allow (statsPlan), the rest from audit_logs; the three queries
// run concurrently.
func (s *Store) Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error) {
	return s.stats(ctx, q, true)
}

func (s *Store) stats(ctx context.Context, q auditstore.StatsQuery, allowAgg bool) (auditstore.Stats, error) {
	var out auditstore.Stats
	if err := q.Validate(); err != nil {
		return out, err
	}
	bs, as, rs := statsPlan(q, allowAgg)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		rows, err := s.statsQuery(ctx, q, "buckets", bs)
		if err != nil {
			return err
		}
		defer rows.Close()
		out.Buckets, err = auditstore.ReadBuckets(rows)
		return err
	})
	g.Go(func() (err error) {
		rows, err := s.statsQuery(ctx, q, "actors", as)
		if err != nil {
			return err
		}
		defer rows.Close()
		out.Actors, err = auditstore.ReadActors(rows)
		return err
	})
	g.Go(func() (err error) {
		rows, err := s.statsQuery(ctx, q, "resources", rs)
		if err != nil {
			return err
		}
		defer rows.Close()
		out.Resources, err = auditstore.ReadResources(rows)
		return err
	})
	if err := g.Wait(); err != nil {
		return auditstore.Stats{}, fmt.Errorf("clickhouse stats: %w", err)
	}
	return out, nil
}

// statsRows is the row cursor of a stats query.
type statsRows interface {
	auditstore.Rows
	Close() error
}

// statsQuery renders and runs the stats query name over the span sp.
func (s *Store) statsQuery(ctx context.Context, q auditstore.StatsQuery, name string, sp span) (statsRows, error) {
	keys := statsKeys[q.By]
	d := statsData{Agg: sp.agg, Bucket: q.BucketMS(), Key: keys[0], AggKey: keys[1],
		Project: q.ProjectID != nil, Action: q.Action != nil, Source: q.Source != nil, ResourceType: q.ResourceType != nil}
	var termArgs []any
	d.Terms, termArgs = searchTerms(q.Search.Terms, "text")
	org := q.OrgID.String()
	enums := func(action, source, rt bool) []any {
		var args []any
		if action && d.Action {
			args = append(args, uint8(*q.Action))
		}
		if source && d.Source {
			args = append(args, uint8(*q.Source))
		}
		if rt && d.ResourceType {
			args = append(args, uint8(*q.ResourceType))
		}
		return args
	}
	var args []any
	if sp.agg {
		scope := "" // the organization's counts
		if q.ProjectID != nil {
			scope = q.ProjectID.String()
		}
		args = append(args, org, scope, sp.lo, sp.hi)
		args = append(args, enums(name != "resources", name != "resources", true)...)
	}
	since, until := q.Bounds()
	args = append(args, org, since, sp.lo, sp.hi, until)
	if d.Project {
		args = append(args, q.ProjectID.String())
	}
	args = append(args, enums(true, true, true)...)
	args = append(args, termArgs...)
	if name != "buckets" {
		args = append(args, q.Top)
	}
	query, err := render(statsSQL.Lookup(name), d, len(args))
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}
