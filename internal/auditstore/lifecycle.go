package auditstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// The lifecycle of a log's entries: retention expires the oldest of them.
// Leaves are appended in feed order, so the entries persisted before a
// cutoff are (up to the seconds by which concurrent writers interleave) a
// prefix of the log: an expiry names that prefix by its length, BelowLeaf,
// and by the feed key of its last leaf, Last. Its entries whose created
// time is before the cutoff and that no legal hold keeps are deleted; the
// log itself (leaves and stored hashes) stays, so that every proof of what
// remains still verifies and the expired leaves' subtrees can still be
// shown. The expiry record, an audit entry of the organization's audit log
// signed in a checkpoint before anything is deleted, says the same (see
// lifecycle/record.go); the verifier accepts a missing leaf only below the
// BelowLeaf of such a record.

// Expiry is one application of an organization's retention to one of its
// logs, as stored beside the log.
type Expiry struct {
	// Record is the event id of the expiry record (an entry of the
	// organization's audit log) and RecordLeaf its leaf index there.
	Record     uuid.UUID
	RecordLeaf int64
	// BelowLeaf: the expiry covers the leaves 0..BelowLeaf-1; Last is the
	// feed key of leaf BelowLeaf-1 (BelowLeaf > 0).
	BelowLeaf int64
	Last      FeedKey
	// CutoffMS: only entries persisted before it (created_ms < CutoffMS)
	// expire; Retention is the retention in force, CutoffMS's distance
	// from the cycle's time.
	CutoffMS  int64
	Retention time.Duration
	// Kept is how many entries below BelowLeaf stay (held, or persisted
	// after the cutoff); Expired how many the expiry deletes.
	Kept, Expired int64
	// Holds are the legal holds whose entries were kept.
	Holds []uuid.UUID
	// Time is when the cycle planned it; Done is set once every entry it
	// deletes is gone (a cycle that crashed before resumes it).
	Time time.Time
	Done bool
}

// Validate checks the shape of an expiry.
func (e Expiry) Validate() error {
	switch {
	case e.Record == uuid.Nil:
		return fmt.Errorf("%w: expiry without its record", ErrInvalidQuery)
	case e.RecordLeaf < 0 || e.BelowLeaf < 1:
		return fmt.Errorf("%w: expiry of %d leaves recorded at leaf %d", ErrInvalidQuery, e.BelowLeaf, e.RecordLeaf)
	case e.Kept < 0 || e.Expired < 0 || e.Kept+e.Expired > e.BelowLeaf:
		return fmt.Errorf("%w: expiry of %d leaves keeping %d and deleting %d", ErrInvalidQuery, e.BelowLeaf, e.Kept, e.Expired)
	}
	return nil
}

// LifecycleStore is what the retention cycle needs of a store, beside its
// LogStore. Every method returns ErrInvalidQuery (wrapped) for a nil
// organization or an unknown kind.
type LifecycleStore interface {
	// ReadLogLeaves returns the leaves lo <= index < hi of a log, in
	// order (fewer when the log is shorter).
	ReadLogLeaves(ctx context.Context, org uuid.UUID, kind LogKind, lo, hi int64) ([]LogLeaf, error)
	// CountThrough counts the entries of the log's kind stored with a feed
	// key at or before last: all of them, and those persisted before
	// cutoffMS (created_ms < cutoffMS).
	CountThrough(ctx context.Context, org uuid.UUID, kind LogKind, last FeedKey, cutoffMS int64) (all, before int64, err error)
	// DeleteExpired deletes the entries of the log's kind with a feed key
	// at or before last, persisted before cutoffMS, whose event id is not
	// in keep, and returns how many it deleted. It may work in steps (a
	// step's rows are gone when it returns; a crash leaves the rest for a
	// call with the same arguments) and must not hold writers off for
	// long. Deleting what is gone already is not an error.
	DeleteExpired(ctx context.Context, org uuid.UUID, kind LogKind, last FeedKey, cutoffMS int64, keep map[uuid.UUID]bool) (int64, error)
	// SaveExpiry stores an expiry of a log (again: replaces the one of the
	// same record).
	SaveExpiry(ctx context.Context, org uuid.UUID, kind LogKind, e Expiry) error
	// LatestExpiry returns the log's expiry of the largest RecordLeaf
	// (false: none).
	LatestExpiry(ctx context.Context, org uuid.UUID, kind LogKind) (Expiry, bool, error)
}

// ValidateExpiry checks the arguments of SaveExpiry.
func ValidateExpiry(org uuid.UUID, kind LogKind, e Expiry) error {
	if err := ValidateLog(org, kind); err != nil {
		return err
	}
	return e.Validate()
}

// Erasure: the entries in which a person appears are rewritten, their
// identifying values replaced by a pseudonym, after a record naming their
// leaves is signed (lifecycle/erase.go). The log keeps each entry's
// original leaf; the store keeps it beside the entry (ErasedEntry), and
// the routes serve it with the entry, so that the verifier can place the
// leaf of an entry whose content no longer hashes to it.

// Columns that an erasure may rewrite, by kind. SaltColumn is only ever
// cleared: the entry then has no salt.
var (
	AuditErasable      = []string{"display_name", "user_id", "principal_id", "client_ip", "resource_id", "resource_display", "data", SaltColumn}
	ExecutionsErasable = []string{"display_name", "user_id", "principal_id", "client_ip", "execution_error", SaltColumn}
)

// SaltColumn is the column of an entry's salt (schemas.AuditEvent.Salt).
const SaltColumn = "salt"

// Rewrite is one entry's erasure: the new values of some of its erasable
// columns (nil: NULL; an audit entry's NOT NULL columns take ""; the salt
// takes nil or "", which clear it), the erasure and the entry's original
// leaf hash.
type Rewrite struct {
	EventID  uuid.UUID
	Set      map[string]*string
	Erasure  uuid.UUID
	LeafHash [32]byte
	// Fields are the entry's fields opened (the JSON of
	// internal/tlog.ErasedFields) when its leaf is of version 2; nil for
	// one of version 1.
	Fields json.RawMessage
}

// ErasedEntry is what the store keeps of an entry's erasure.
type ErasedEntry struct {
	Erasure  uuid.UUID
	LeafHash [32]byte
	// Fields: see Rewrite.Fields.
	Fields json.RawMessage
}

// ErasureStore rewrites and tells the erased entries.
type ErasureStore interface {
	// RewriteEntries applies the rewrites of entries of the log's kind
	// and keeps each entry's erasure, atomically per call. An entry that
	// is not stored is skipped. Columns outside the kind's erasable ones
	// are ErrInvalidQuery.
	RewriteEntries(ctx context.Context, org uuid.UUID, kind LogKind, rewrites []Rewrite) error
	// ErasedEntries returns the erasures of those of ids that were erased.
	ErasedEntries(ctx context.Context, org uuid.UUID, kind LogKind, ids []uuid.UUID) (map[uuid.UUID]ErasedEntry, error)
}

// ValidateRewrites checks the columns of rewrites of kind.
func ValidateRewrites(org uuid.UUID, kind LogKind, rewrites []Rewrite) error {
	if err := ValidateLog(org, kind); err != nil {
		return err
	}
	allowed := AuditErasable
	if kind == LogExecutions {
		allowed = ExecutionsErasable
	}
	for _, r := range rewrites {
		if r.EventID == uuid.Nil || r.Erasure == uuid.Nil {
			return fmt.Errorf("%w: a rewrite without its event or erasure", ErrInvalidQuery)
		}
		for col := range r.Set {
			if !slices.Contains(allowed, col) {
				return fmt.Errorf("%w: column %q of %s is not erasable", ErrInvalidQuery, col, kind)
			}
			if v := r.Set[col]; col == SaltColumn && v != nil && *v != "" {
				return fmt.Errorf("%w: the salt of %s can only be cleared", ErrInvalidQuery, r.EventID)
			}
		}
	}
	return nil
}
