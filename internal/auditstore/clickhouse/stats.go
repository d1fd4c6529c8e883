package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"time"

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
	// Signed: a raw range is subtracted; Split ends the left range, Left
	// and Right are the signs (1 or -1) of the two ranges.
	Signed      bool
	Split       int64
	Left, Right int
	// Raw: audit_logs is read (without an aggregate, always; with one,
	// when a ragged end is not empty).
	Raw bool
}

// rng is a range [lo, hi) of ts_ms read from audit_logs, counted or
// subtracted (neg).
type rng struct {
	lo, hi int64
	neg    bool
}

// span is how a stats query reads a window [since, until): the whole
// steps [lo, hi) from an aggregate of granularity step (when agg), and two
// ranges of audit_logs, left and right, that correct it at the ragged
// ends. A ragged end is either counted from its raw rows (the part of the
// step inside the window, added) or from the aggregate of its whole step
// minus the raw rows of the step outside the window (subtracted): both
// count the same rows, and the planner takes whichever reads fewer. The
// subtraction is what makes 30 days ending now cheap: the step after now
// holds almost nothing. Without an aggregate part the whole window is one
// raw range.
type span struct {
	agg         bool
	lo, hi      int64
	left, right rng
}

// complement decides whether a ragged end is read as its step minus the
// rest of the step (true) rather than its own rows, given the estimated
// rows of each (in ms of past time).
type complement func(part, rest int64) bool

// fewer is the planner's choice: the side with less past time.
func fewer(part, rest int64) bool { return rest < part }

// rawOnly reads the whole window from audit_logs.
func rawOnly(since, until int64) span {
	return span{lo: until, hi: until, left: rng{lo: since, hi: until}, right: rng{lo: until, hi: until}}
}

// aggSpan plans q's window for an aggregate of granularity step, when
// usable. now bounds the estimates: rows after it are rare (only entries
// dated in the future).
func aggSpan(q auditstore.StatsQuery, step int64, usable bool, now int64, comp complement) span {
	since, until := q.Bounds()
	if !usable {
		return rawOnly(since, until)
	}
	past := func(a, b int64) int64 { return max(0, min(b, now)-a) }
	lo, hi := auditstore.CeilTo(since, step), auditstore.FloorTo(until, step)
	if lo > hi { // within one step, [hi, lo)
		if comp(past(since, until), past(hi, since)+past(until, lo)) {
			return span{agg: true, lo: hi, hi: lo, left: rng{lo: hi, hi: since, neg: true}, right: rng{lo: until, hi: lo, neg: true}}
		}
		return rawOnly(since, until)
	}
	sp := span{agg: true, lo: lo, hi: hi, left: rng{lo: since, hi: lo}, right: rng{lo: hi, hi: until}}
	if since < lo && comp(past(since, lo), past(lo-step, since)) {
		sp.lo, sp.left = lo-step, rng{lo: lo - step, hi: since, neg: true}
	}
	if hi < until && comp(past(hi, until), past(until, hi+step)) {
		sp.hi, sp.right = hi+step, rng{lo: until, hi: hi + step, neg: true}
	}
	if sp.lo == sp.hi {
		return rawOnly(since, until)
	}
	return sp
}

// statsPlan says which parts of the three stats queries come from the
// aggregates. allowAgg false reads every part from audit_logs (tests
// compare both). None keeps what a search tests, so a search reads
// audit_logs; the counts' and the actors' aggregates keep action, source and
// resource type, so they serve filters on them (the counts only for hours
// and days, not minutes); the resources' aggregate keeps the resource type
// only.
func statsPlan(q auditstore.StatsQuery, allowAgg bool, now int64, comp complement) (buckets, actors, resources span) {
	plain := allowAgg && q.Search.Empty()
	buckets = aggSpan(q, hourMS, plain && q.Bucket >= auditstore.BucketHour, now, comp)
	actors = aggSpan(q, dayMS, plain, now, comp)
	resources = aggSpan(q, dayMS, plain && q.Action == nil && q.Source == nil, now, comp)
	return buckets, actors, resources
}

var _ auditstore.StatsStore = (*Store)(nil)

// Stats implements auditstore.StatsStore: the whole hours (days, for the
// tops) of the window from the aggregates of 0007 where the
// filters allow (statsPlan), the ragged ends from audit_logs (added, or
// subtracted from their whole step: aggSpan); the three queries run
// concurrently.
func (s *Store) Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error) {
	return s.stats(ctx, q, true, fewer)
}

func (s *Store) stats(ctx context.Context, q auditstore.StatsQuery, allowAgg bool, comp complement) (auditstore.Stats, error) {
	var out auditstore.Stats
	if err := q.Validate(); err != nil {
		return out, err
	}
	bs, as, rs := statsPlan(q, allowAgg, time.Now().UnixMilli(), comp)
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
		Project: q.ProjectID != nil, Action: q.Action != nil, Source: q.Source != nil, ResourceType: q.ResourceType != nil,
		Signed: sp.left.neg || sp.right.neg, Split: sp.left.hi, Left: sign(sp.left), Right: sign(sp.right),
		Raw: !sp.agg || sp.left.lo < sp.left.hi || sp.right.lo < sp.right.hi}
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
	if d.Raw {
		args = append(args, org, sp.left.lo, sp.left.hi, sp.right.lo, sp.right.hi)
		if d.Project {
			args = append(args, q.ProjectID.String())
		}
		args = append(args, enums(true, true, true)...)
		args = append(args, termArgs...)
	}
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

// sign is the count of a row of r: 1, or -1 when r is subtracted.
func sign(r rng) int {
	if r.neg {
		return -1
	}
	return 1
}
