package auditstore

import (
	"math"
	"time"

	"github.com/google/uuid"
)

// Bounds of the time window in which a store looks an event up by its id
// alone (HasAudit, HasExecution), for stores whose primary key starts with
// the organization and the event's time (ClickHouse): the window lets the
// key prune the scan to a few granules instead of the whole organization.
const (
	// LookupV7Slack is how far the event's time (ts, started_at) may be from
	// the time in a UUIDv7 id. Our producers (producers.Recorder,
	// toolrunner) take both from the same clock at the same moment.
	LookupV7Slack = 10 * time.Minute
	// LookupRecent is how far back an event with an id that is not a UUIDv7
	// is looked for: a caller waits for an event it has just caused.
	LookupRecent = time.Hour
)

// LookupWindow returns the time range [lo, hi) (Unix ms) in which a store
// whose key orders by time looks up the event id: LookupV7Slack either side
// of the time in the id when it is a UUIDv7, else the LookupRecent before
// now with no upper bound. An event whose time lies outside the window may
// not be found by such a store.
func LookupWindow(id uuid.UUID, now time.Time) (lo, hi int64) {
	if id.Version() == 7 {
		sec, nsec := id.Time().UnixTime()
		at := time.Unix(sec, nsec)
		return at.Add(-LookupV7Slack).UnixMilli(), at.Add(LookupV7Slack).UnixMilli()
	}
	return now.Add(-LookupRecent).UnixMilli(), math.MaxInt64
}
