package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// StatsReader answers the stats routes (auditstore.StatsStore). The routes
// are mounted only when the store given to New implements it.
type StatsReader interface {
	Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error)
}

// StatsTop is how many actors and resources the stats routes rank.
const StatsTop = 10

// Buckets of the stats routes (the bucket parameter) and their default
// windows when since is absent: until (default now) minus an hour of
// minutes, a day of hours, 30 days.
var (
	statsBuckets = map[string]time.Duration{"minute": auditstore.BucketMinute, "hour": auditstore.BucketHour, "day": auditstore.BucketDay}
	statsRanges  = map[string]time.Duration{"minute": time.Hour, "hour": 24 * time.Hour, "day": 30 * 24 * time.Hour}
)

// Defaults of the bucket and by parameters.
const (
	DefaultStatsBucket = "hour"
	DefaultStatsBy     = auditstore.ByAction
)

// AuditStatsParams are the query parameters of the stats routes: bucket,
// by and the filters of the listing (whatever AuditParams holds but its
// paging, so that a filter added there applies here too).
var AuditStatsParams = statsParams(AuditParams)

func statsParams(list []string) []string {
	out := []string{"bucket", "by"}
	for _, p := range list {
		if !slices.Contains(pagingParams, p) {
			out = append(out, p)
		}
	}
	return out
}

// StatsParams are the parsed parameters of a stats route.
type StatsParams struct {
	ListParams
	Bucket string
	By     auditstore.StatsKey
}

// ParseStats parses the parameters of a stats route: those of the listing
// (ParseList) and bucket and by; it fills the window's defaults relative to
// now and refuses a window of more than auditstore.MaxStatsBuckets buckets.
func ParseStats(path, query Getter, withProject bool, now time.Time) (StatsParams, error) {
	var p StatsParams
	var err error
	if p.ListParams, err = ParseList(path, query, withProject); err != nil {
		return p, err
	}
	p.Bucket = query("bucket")
	if p.Bucket == "" {
		p.Bucket = DefaultStatsBucket
	}
	if _, ok := statsBuckets[p.Bucket]; !ok {
		return p, badParam("bucket", "%q is not minute, hour or day", p.Bucket)
	}
	switch by := auditstore.StatsKey(query("by")); by {
	case "":
		p.By = DefaultStatsBy
	case auditstore.ByAction, auditstore.BySource, auditstore.ByResourceType:
		p.By = by
	default:
		return p, badParam("by", "%q is not action, source or resource_type", by)
	}
	if p.Until == nil {
		u := now.UTC()
		if p.Since != nil && !p.Since.Before(u) {
			return p, badParam("since", "%s is not before now (until's default)", p.Since.Format(time.RFC3339Nano))
		}
		p.Until = &u
	}
	if p.Since == nil {
		s := p.Until.Add(-statsRanges[p.Bucket])
		p.Since = &s
	}
	if n := p.storeQuery().Buckets(); n > auditstore.MaxStatsBuckets {
		hint := "use a shorter range"
		if p.Bucket != "day" {
			hint = "use a wider bucket or a shorter range"
		}
		return p, badParam("bucket", "range too long for bucket=%s (%d buckets, at most %d); %s", p.Bucket, n, auditstore.MaxStatsBuckets, hint)
	}
	return p, nil
}

// storeQuery is the store query of the parameters.
func (p StatsParams) storeQuery() auditstore.StatsQuery {
	return auditstore.StatsQuery{OrgID: p.OrgID, ProjectID: p.ProjectID, Filter: auditQuery(p.ListParams, 1, nil).Filter,
		Bucket: statsBuckets[p.Bucket], By: p.By, Top: StatsTop}
}

// StatsData is the data of a stats answer.
type StatsData struct {
	// Bucket, By, Since and Until are the parameters applied, defaults
	// included.
	Bucket string `json:"bucket"`
	By     string `json:"by"`
	Since  string `json:"since"`
	Until  string `json:"until"`
	// Buckets are every bucket the window touches, oldest first, those
	// without entries with empty counts (a histogram draws them as such).
	Buckets []StatsBucket `json:"buckets"`
	Top     StatsTops     `json:"top"`
}

// StatsBucket counts the entries of a bucket by the enum name of the key.
type StatsBucket struct {
	Start  string            `json:"start"`
	Counts map[string]uint64 `json:"counts"`
}

// StatsTops are the most frequent actors and resources of the window.
type StatsTops struct {
	Actors    []StatsValue `json:"actors"`
	Resources []StatsValue `json:"resources"`
}

// StatsValue is a value and its entries: a principal id (what the search
// key actor: takes) or a resource id (resource_id:) with its type.
type StatsValue struct {
	Value        string  `json:"value"`
	ResourceType *string `json:"resource_type,omitempty"`
	Count        uint64  `json:"count"`
	// Display is what the newest entry of the window calls it: the
	// actor's display_name, the resource's resource_display (null when
	// none, or not found in time).
	Display *string `json:"display"`
}

// NewStatsData converts the store's answer to q: dense buckets from the
// bucket of since to the one of until, counts keyed by enum names (an entry
// without a resource type under RESOURCE_TYPE_UNSPECIFIED).
func NewStatsData(p StatsParams, st auditstore.Stats) StatsData {
	q := p.storeQuery()
	d := StatsData{Bucket: p.Bucket, By: string(p.By), Since: apiitem.FormatTime(*p.Since), Until: apiitem.FormatTime(*p.Until),
		Buckets: []StatsBucket{}, Top: StatsTops{Actors: []StatsValue{}, Resources: []StatsValue{}}}
	name := map[auditstore.StatsKey]func(uint8) string{
		auditstore.ByAction:       func(k uint8) string { return schemas.AuditAction(k).String() },
		auditstore.BySource:       func(k uint8) string { return schemas.AuditSource(k).String() },
		auditstore.ByResourceType: func(k uint8) string { return schemas.ResourceType(k).String() },
	}[p.By]
	_, hi := q.Bounds()
	i := 0
	for start := q.FirstBucket(); start < hi; start += q.BucketMS() {
		b := StatsBucket{Start: apiitem.FormatTime(time.UnixMilli(start)), Counts: map[string]uint64{}}
		// The store's buckets are inside the window and oldest first.
		for i < len(st.Buckets) && st.Buckets[i].Start.UnixMilli() < start {
			i++
		}
		if i < len(st.Buckets) && st.Buckets[i].Start.UnixMilli() == start {
			for k, n := range st.Buckets[i].Counts {
				b.Counts[name(k)] += n
			}
		}
		d.Buckets = append(d.Buckets, b)
	}
	for _, a := range st.Actors {
		d.Top.Actors = append(d.Top.Actors, StatsValue{Value: a.PrincipalID, Count: a.Count})
	}
	for _, r := range st.Resources {
		v := StatsValue{Value: r.ResourceID, Count: r.Count}
		if r.ResourceType != 0 {
			rt := schemas.ResourceType(r.ResourceType).String()
			v.ResourceType = &rt
		}
		d.Top.Resources = append(d.Top.Resources, v)
	}
	return d
}

func (s *Server) auditStats(store StatsReader, withProject bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		perr := httpapi.CheckParams(c.Context().QueryArgs().VisitAll, AuditStatsParams)
		var p StatsParams
		if perr == nil {
			p, perr = ParseStats(func(n string) string { return c.Params(n) }, func(n string) string { return c.Query(n) }, withProject, time.Now())
		} else {
			// The scope, so that authentication still comes first.
			p.OrgID, p.ProjectID, _ = parseScope(func(n string) string { return c.Params(n) }, withProject)
		}
		if err := s.authorizeList(c, p.OrgID, p.ProjectID, perr); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
		defer cancel()
		st, err := store.Stats(ctx, p.storeQuery())
		if errors.Is(err, auditstore.ErrInvalidQuery) {
			return fiber.NewError(fiber.StatusBadRequest, err.Error())
		}
		if err != nil {
			return fmt.Errorf("audit log stats: %w", err)
		}
		d := NewStatsData(p, st)
		s.topNames(ctx, p, &d)
		return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: d})
	}
}

// Name lookups of the top actors and resources: at most namesAtOnce at a
// time, all within namesBudget (a name not found in time stays null: the
// counts matter more than the names).
const (
	namesAtOnce    = 4
	namesBudget    = 2 * time.Second
	StatsNamesPeek = 5 // entries read per lookup (an actor: term also matches user ids and names)
)

// topNames fills the Display of d's top actors and resources: the name on
// the newest entry of the window, found as the dashboard's one-click
// filter finds them (the list route with actor: or resource_id:). Top
// values are frequent by definition, so the newest entry is near the top
// of the newest-first order.
func (s *Server) topNames(ctx context.Context, p StatsParams, d *StatsData) {
	ctx, cancel := context.WithTimeout(ctx, namesBudget)
	defer cancel()
	type lookup struct {
		v    *StatsValue
		term search.Term
		name func(e *schemas.AuditEntry) *string
	}
	var ls []lookup
	for i := range d.Top.Actors {
		v := &d.Top.Actors[i]
		ls = append(ls, lookup{v, search.Term{Key: "actor", Values: []string{v.Value}}, func(e *schemas.AuditEntry) *string {
			if e.PrincipalID != v.Value || e.DisplayName == "" {
				return nil
			}
			return &e.DisplayName
		}})
	}
	for i := range d.Top.Resources {
		v := &d.Top.Resources[i]
		ls = append(ls, lookup{v, search.Term{Key: "resource_id", Values: []string{v.Value}}, func(e *schemas.AuditEntry) *string {
			if e.ResourceID == nil || *e.ResourceID != v.Value || e.ResourceDisplay == nil || *e.ResourceDisplay == "" ||
				(v.ResourceType != nil && (e.ResourceType == nil || e.ResourceType.String() != *v.ResourceType)) {
				return nil
			}
			return e.ResourceDisplay
		}})
	}
	sem := make(chan struct{}, namesAtOnce)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			q := auditQuery(p.ListParams, StatsNamesPeek, nil)
			q.Filter.Search.Terms = append(slices.Clone(q.Filter.Search.Terms), l.term)
			page, err := s.store.ListAudit(ctx, q)
			if err != nil {
				return // the name stays null; the counts are the answer
			}
			for i := range page.Items {
				if n := l.name(&page.Items[i]); n != nil {
					l.v.Display = n
					return
				}
			}
		}()
	}
	wg.Wait()
}
