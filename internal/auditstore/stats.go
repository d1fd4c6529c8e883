package auditstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// StatsStore counts an organization's entries over time (the stats route
// and the dashboard's histogram).
type StatsStore interface {
	// Stats counts the entries of q per bucket and key and ranks the most
	// frequent actors and resources of q's window. It counts stored rows,
	// as the listings list them: an event that a backend stored twice (see
	// the backend's notes) may count twice.
	Stats(ctx context.Context, q StatsQuery) (Stats, error)
}

// Bucket widths of a StatsQuery. Buckets are aligned on the Unix epoch in
// UTC: a minute, an hour or a UTC day.
const (
	BucketMinute = time.Minute
	BucketHour   = time.Hour
	BucketDay    = 24 * time.Hour
)

// StatsKey is what the counts of a bucket are keyed by.
type StatsKey string

// Keys of the counts.
const (
	ByAction       StatsKey = "action"
	BySource       StatsKey = "source"
	ByResourceType StatsKey = "resource_type"
)

// Bounds of a StatsQuery.
const (
	// MaxStatsBuckets bounds the buckets of a window (the ones it touches,
	// empty or not).
	MaxStatsBuckets = 1000
	// MaxStatsTop bounds StatsQuery.Top.
	MaxStatsTop = 100
)

// StatsQuery selects what Stats counts: the entries of the organization
// (and project) that Filter keeps, in Filter.Window, which must have both
// ends.
type StatsQuery struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	Filter
	// Bucket is BucketMinute, BucketHour or BucketDay.
	Bucket time.Duration
	// By keys the counts of each bucket.
	By StatsKey
	// Top is how many actors and resources to rank, 1..MaxStatsTop.
	Top int
}

// Validate checks the query.
func (q StatsQuery) Validate() error {
	if q.OrgID == uuid.Nil {
		return fmt.Errorf("%w: organization id is required", ErrInvalidQuery)
	}
	switch q.Bucket {
	case BucketMinute, BucketHour, BucketDay:
	default:
		return fmt.Errorf("%w: bucket %s is not a minute, an hour or a day", ErrInvalidQuery, q.Bucket)
	}
	switch q.By {
	case ByAction, BySource, ByResourceType:
	default:
		return fmt.Errorf("%w: stats by %q", ErrInvalidQuery, q.By)
	}
	if q.Top < 1 || q.Top > MaxStatsTop {
		return fmt.Errorf("%w: top %d not in 1..%d", ErrInvalidQuery, q.Top, MaxStatsTop)
	}
	if q.Since == nil || q.Until == nil {
		return fmt.Errorf("%w: stats need both since and until", ErrInvalidQuery)
	}
	if err := q.Window.validate(); err != nil {
		return err
	}
	if n := q.Buckets(); n > MaxStatsBuckets {
		return fmt.Errorf("%w: %d buckets of %s, at most %d", ErrInvalidQuery, n, q.Bucket, MaxStatsBuckets)
	}
	return nil
}

// BucketMS is the bucket width in milliseconds.
func (q StatsQuery) BucketMS() int64 { return q.Bucket.Milliseconds() }

// FirstBucket is the start (Unix ms) of the bucket that holds since.
func (q StatsQuery) FirstBucket() int64 {
	lo, _ := q.Bounds()
	return FloorTo(lo, q.BucketMS())
}

// Buckets is the number of buckets the window touches.
func (q StatsQuery) Buckets() int64 {
	_, hi := q.Bounds()
	b := q.BucketMS()
	return (hi - q.FirstBucket() + b - 1) / b
}

// FloorTo is the multiple of step at or below ms (step > 0).
func FloorTo(ms, step int64) int64 {
	r := ms % step
	if r < 0 {
		r += step
	}
	return ms - r
}

// CeilTo is the multiple of step at or above ms (step > 0).
func CeilTo(ms, step int64) int64 {
	f := FloorTo(ms, step)
	if f == ms {
		return f
	}
	return f + step
}

// Stats is the answer of StatsStore.Stats.
type Stats struct {
	// Buckets are the buckets that hold entries, oldest first.
	Buckets []StatsBucket
	// Actors are the most frequent principal ids, most entries first, ties
	// by principal id.
	Actors []TopActor
	// Resources are the most frequent resources (entries with a
	// resource_id), most entries first, ties by resource id then type.
	Resources []TopResource
}

// StatsBucket counts the entries of one bucket by key: the enum number of
// the action, source or resource type (0 for an entry without one).
type StatsBucket struct {
	Start  time.Time
	Counts map[uint8]uint64
}

// TopActor is a principal id and its entries.
type TopActor struct {
	PrincipalID string
	Count       uint64
}

// TopResource is a resource (its type, 0 when none, and id) and its entries.
type TopResource struct {
	ResourceType uint8
	ResourceID   string
	Count        uint64
}

// ReadBuckets reads the rows (start ms, key, count; in order of start) of
// a stats buckets query; both SQL backends answer in this shape.
func ReadBuckets(rows Rows) ([]StatsBucket, error) {
	var out []StatsBucket
	for rows.Next() {
		var start int64
		var key uint8
		var n uint64
		if err := rows.Scan(&start, &key, &n); err != nil {
			return nil, fmt.Errorf("scan stats bucket: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Start.UnixMilli() != start {
			out = append(out, StatsBucket{Start: time.UnixMilli(start).UTC(), Counts: map[uint8]uint64{}})
		}
		out[len(out)-1].Counts[key] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stats buckets: %w", err)
	}
	return out, nil
}

// ReadActors reads the rows (principal_id, count) of a top actors query.
func ReadActors(rows Rows) ([]TopActor, error) {
	var out []TopActor
	for rows.Next() {
		var a TopActor
		if err := rows.Scan(&a.PrincipalID, &a.Count); err != nil {
			return nil, fmt.Errorf("scan top actor: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read top actors: %w", err)
	}
	return out, nil
}

// ReadResources reads the rows (resource_type, resource_id, count) of a top
// resources query.
func ReadResources(rows Rows) ([]TopResource, error) {
	var out []TopResource
	for rows.Next() {
		var r TopResource
		if err := rows.Scan(&r.ResourceType, &r.ResourceID, &r.Count); err != nil {
			return nil, fmt.Errorf("scan top resource: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read top resources: %w", err)
	}
	return out, nil
}
