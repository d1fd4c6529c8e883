package auditstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"
)

// The tamper-evidence logs (issue 24): per organization, a Merkle log over
// its audit entries (LogAudit) and one over its tool executions
// (LogExecutions), with RFC 6962 hashing as golang.org/x/mod/sumdb/tlog
// computes it. A store keeps, beside the entries, each log's leaves (a
// leaf index and the entry it stands for), the tree's stored hashes
// (tlog.StoredHashIndex numbering: a log of n leaves holds
// tlog.StoredHashCount(n) of them, about two per leaf, the leaf hashes
// among them) and the signed checkpoints. Retention may delete entries
// (their payloads), never these: proofs keep working for what remains.

// LogKind names one of an organization's two logs.
type LogKind uint8

// The logs of an organization.
const (
	LogAudit      LogKind = 0 // audit entries (audit_logs)
	LogExecutions LogKind = 1 // tool executions (tool_executions)
)

// Valid reports whether k names a log.
func (k LogKind) Valid() bool { return k == LogAudit || k == LogExecutions }

func (k LogKind) String() string {
	switch k {
	case LogAudit:
		return "audit"
	case LogExecutions:
		return "executions"
	}
	return fmt.Sprintf("LogKind(%d)", uint8(k))
}

// LogLeaf is one leaf of a log: its index (0, 1, …), the entry's event id
// and the entry's feed position (where the sequencer resumes after it).
type LogLeaf struct {
	Index   int64
	EventID uuid.UUID
	Key     FeedKey
}

// StoredHash is one hash of a log's tree at its tlog.StoredHashIndex.
type StoredHash struct {
	Index int64
	Hash  [32]byte
}

// Checkpoint is a signed tree head: the log's size and root hash, the
// time it was signed (stored to the millisecond), the id of the signing
// key and the whole signed note (C2SP tlog-checkpoint body and signature).
type Checkpoint struct {
	Size  int64
	Root  [32]byte
	Time  time.Time
	KeyID string
	Note  []byte
}

// Errors of the log stores.
var (
	// ErrLogConflict: a write that would change what a log already holds
	// (another leaf or hash at a stored index, another root for a stored
	// size, an event id already in the log elsewhere) or leave a gap.
	ErrLogConflict = errors.New("log conflict")
	// ErrNotFound: a stored hash that the log does not hold.
	ErrNotFound = errors.New("not found")
)

// LogStore keeps the tamper-evidence logs. Each organization's log of a
// kind has one writer at a time (the sequencer holding its lease): AppendLog
// checks the head and then writes, which is enough with one writer and is
// not safe with two. Reads are safe at any time. Every method returns
// ErrInvalidQuery (wrapped) for a nil organization or an unknown kind.
type LogStore interface {
	// AppendLog stores leaves whose indexes follow each other, starting at
	// or below the log's size, and the hashes they add: exactly the stored
	// hashes from tlog.StoredHashCount(first) up to
	// tlog.StoredHashCount(first+len(leaves)), in order (the concatenation
	// of tlog.StoredHashes for each leaf). It returns nil only once they
	// are durable and the log's size covers them. Idempotent: leaves and
	// hashes below the current size must equal the stored ones and are
	// not written again (a sequencer retrying after a crash); a leaf or
	// hash that differs, a first index above the size (a gap) or an event
	// id that the log holds at another index is ErrLogConflict, and
	// nothing is written.
	AppendLog(ctx context.Context, org uuid.UUID, kind LogKind, leaves []LogLeaf, hashes []StoredHash) error
	// LogHead returns the log's size and its last leaf (zero values for
	// an empty log), read from a small head record, not from the leaves.
	LogHead(ctx context.Context, org uuid.UUID, kind LogKind) (size int64, last LogLeaf, err error)
	// ReadLogHashes returns the stored hashes at these indexes, in the
	// order asked (tlog.HashReader's contract); an index the log does
	// not hold is ErrNotFound (wrapped). Hashes written by an append that
	// has not returned (or that crashed) may be seen: ask only for indexes
	// below tlog.StoredHashCount of a size the log has reached.
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind LogKind, indexes []int64) ([][32]byte, error)
	// LeafIndexes maps event ids to their leaf indexes in the log; an id
	// the log does not hold yet (not sequenced, or above the size) is
	// absent from the map. At most MaxLimit ids.
	LeafIndexes(ctx context.Context, org uuid.UUID, kind LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error)
	// LeafTile is the start of an inclusion proof in one read (ClickHouse:
	// one query): the leaf index of event among the log's first size
	// leaves, and the stored hashes of its tile (TileHashRange: the leaf
	// hash and every hash over the tile's leaves that the proof of the
	// leaf in the tree of size asks for; the proof's others are of the
	// levels above and of the tree's right edge), in index order. size
	// must be a size the log has reached (at most LogHead's: the caller's
	// guarantee); found is false, with no hashes, when the log holds no
	// leaf of the event below size (not sequenced yet, at or above size).
	LeafTile(ctx context.Context, org uuid.UUID, kind LogKind, event uuid.UUID, size int64) (index int64, hashes []StoredHash, found bool, err error)
	// LeafRange returns the leaves lo <= index < hi of the log, in order
	// (their event ids and feed positions: what a tile of entries is made
	// of), in one read of a range of the leaves' primary key, without a
	// head read: hi must be at most a size the log has reached (LogHead's
	// or a checkpoint's: the caller's guarantee, as LeafTile's). A leaf of
	// the range that the log does not hold is ErrNotFound (wrapped); lo <
	// 0, hi < lo or more than MaxLeafRange leaves is ErrInvalidQuery.
	// (LifecycleStore.ReadLogLeaves reads the head first and answers fewer
	// leaves past the log's end.)
	LeafRange(ctx context.Context, org uuid.UUID, kind LogKind, lo, hi int64) ([]LogLeaf, error)
	// SaveCheckpoint stores a checkpoint of the log. Its root must be the
	// tree hash of the log's first Size leaves (ErrLogConflict otherwise:
	// a size above the log's, or another root, is never stored). One
	// checkpoint is kept per size: saving one of a size already stored
	// keeps the newer (by Time), so saving the same one again is a no-op
	// and an hourly checkpoint of an unchanged log replaces the previous;
	// of the same Time and root, the longer note (the same checkpoint
	// with witnesses' cosignatures added) is kept.
	SaveCheckpoint(ctx context.Context, org uuid.UUID, kind LogKind, cp Checkpoint) error
	// LatestCheckpoint returns the checkpoint of the largest size (false:
	// none stored).
	LatestCheckpoint(ctx context.Context, org uuid.UUID, kind LogKind) (Checkpoint, bool, error)
	// CheckpointAt returns the stored checkpoint of exactly this size
	// (false: none).
	CheckpointAt(ctx context.Context, org uuid.UUID, kind LogKind, size int64) (Checkpoint, bool, error)
	// LogOrgs lists the organizations whose log of this kind holds a leaf,
	// in no particular order.
	LogOrgs(ctx context.Context, kind LogKind) ([]uuid.UUID, error)
	// LogHeads returns the size of every log of this kind that holds a
	// leaf, by organization, in one read of the head records (the
	// checkpointer's round: one query however many organizations).
	LogHeads(ctx context.Context, kind LogKind) (map[uuid.UUID]int64, error)
}

// TileHeight is the height of the tiles of the stored hashes (as
// golang.org/x/mod/sumdb/tlog's tiles of height 8): a tile of level L
// holds the hashes of levels 8L to 8L+7 over 2^8 nodes of level 8L.
const TileHeight = 8

// TileHashRange is the range [lo, hi) of stored hash indexes that the
// leaves of leaf's tile (of level 0: 2^TileHeight leaves, aligned) added,
// up to leaf size-1: they hold the leaf hash and every node of levels
// below TileHeight over those leaves, complete in the tree of size leaves.
// leaf must be below size.
func TileHashRange(leaf, size int64) (lo, hi int64) {
	t := leaf &^ (1<<TileHeight - 1)
	return tlog.StoredHashCount(t), tlog.StoredHashCount(min(t+1<<TileHeight, size))
}

// MaxLeafRange is the most leaves one LeafRange call reads: 16 tiles of
// entries.
const MaxLeafRange = 16 << TileHeight

// ValidateLeafRange checks the arguments of LeafRange.
func ValidateLeafRange(org uuid.UUID, kind LogKind, lo, hi int64) error {
	if err := ValidateLog(org, kind); err != nil {
		return err
	}
	if lo < 0 || hi < lo || hi-lo > MaxLeafRange {
		return fmt.Errorf("%w: leaf range %d..%d (at most %d leaves from 0 on)", ErrInvalidQuery, lo, hi, MaxLeafRange)
	}
	return nil
}

// CheckLeafRange checks that leaves, read for LeafRange, are exactly the
// leaves lo..hi-1 in order: ErrNotFound (wrapped) names the first one
// missing.
func CheckLeafRange(leaves []LogLeaf, lo, hi int64) error {
	for i, l := range leaves {
		if l.Index != lo+int64(i) {
			return fmt.Errorf("leaf %d: %w", lo+int64(i), ErrNotFound)
		}
	}
	if int64(len(leaves)) != hi-lo {
		return fmt.Errorf("leaf %d: %w", lo+int64(len(leaves)), ErrNotFound)
	}
	return nil
}

// ValidateLog checks the organization and kind of a log call.
func ValidateLog(org uuid.UUID, kind LogKind) error {
	if org == uuid.Nil {
		return fmt.Errorf("%w: organization id is required", ErrInvalidQuery)
	}
	if !kind.Valid() {
		return fmt.Errorf("%w: unknown log kind %d", ErrInvalidQuery, uint8(kind))
	}
	return nil
}

// AppendPlan is an append split against the log's size: the leaves and
// hashes that the log holds already (Old, OldHashes: they must be equal to
// the stored ones) and those to write (New, NewHashes).
type AppendPlan struct {
	Old       []LogLeaf
	OldHashes []StoredHash
	New       []LogLeaf
	NewHashes []StoredHash
}

// Size is the log's size once the plan is written.
func (p AppendPlan) Size(size int64) int64 {
	if len(p.New) == 0 {
		return size
	}
	return p.New[len(p.New)-1].Index + 1
}

// PlanAppend checks the shape of an append to a log of this size (see
// LogStore.AppendLog) and splits it. Shapes that no correct sequencer
// writes (indexes that do not follow each other, hashes that are not
// exactly those the leaves add, a nil event id) are ErrInvalidQuery; a
// first index above size is ErrLogConflict.
func PlanAppend(size int64, leaves []LogLeaf, hashes []StoredHash) (AppendPlan, error) {
	if len(leaves) == 0 {
		if len(hashes) != 0 {
			return AppendPlan{}, fmt.Errorf("%w: %d hashes without leaves", ErrInvalidQuery, len(hashes))
		}
		return AppendPlan{}, nil
	}
	first := leaves[0].Index
	if first < 0 {
		return AppendPlan{}, fmt.Errorf("%w: negative leaf index %d", ErrInvalidQuery, first)
	}
	seen := make(map[uuid.UUID]bool, len(leaves))
	for i, l := range leaves {
		if seen[l.EventID] {
			return AppendPlan{}, fmt.Errorf("%w: event %s twice in one append", ErrLogConflict, l.EventID)
		}
		seen[l.EventID] = true
		if l.Index != first+int64(i) {
			return AppendPlan{}, fmt.Errorf("%w: leaf %d has index %d, want %d", ErrInvalidQuery, i, l.Index, first+int64(i))
		}
		if l.EventID == uuid.Nil {
			return AppendPlan{}, fmt.Errorf("%w: leaf %d has no event id", ErrInvalidQuery, l.Index)
		}
	}
	end := first + int64(len(leaves))
	lo, hi := tlog.StoredHashCount(first), tlog.StoredHashCount(end)
	if int64(len(hashes)) != hi-lo {
		return AppendPlan{}, fmt.Errorf("%w: leaves %d..%d add %d stored hashes, got %d", ErrInvalidQuery, first, end-1, hi-lo, len(hashes))
	}
	for i, h := range hashes {
		if h.Index != lo+int64(i) {
			return AppendPlan{}, fmt.Errorf("%w: hash %d has index %d, want %d", ErrInvalidQuery, i, h.Index, lo+int64(i))
		}
	}
	if first > size {
		return AppendPlan{}, fmt.Errorf("%w: leaves start at %d, the log holds %d (a gap)", ErrLogConflict, first, size)
	}
	split := min(size-first, int64(len(leaves)))
	hsplit := min(tlog.StoredHashCount(first+split)-lo, int64(len(hashes)))
	return AppendPlan{Old: leaves[:split], OldHashes: hashes[:hsplit], New: leaves[split:], NewHashes: hashes[hsplit:]}, nil
}

// CheckStored compares the part of an append that a log holds already with
// what it holds (stored leaves and hashes, in the plan's order):
// ErrLogConflict at the first difference.
func (p AppendPlan) CheckStored(leaves []LogLeaf, hashes [][32]byte) error {
	if len(leaves) != len(p.Old) || len(hashes) != len(p.OldHashes) {
		return fmt.Errorf("%w: %d leaves and %d hashes stored of %d and %d", ErrLogConflict, len(leaves), len(hashes), len(p.Old), len(p.OldHashes))
	}
	for i, l := range p.Old {
		if leaves[i] != l {
			return fmt.Errorf("%w: leaf %d is stored as event %s at %v, not event %s at %v", ErrLogConflict, l.Index, leaves[i].EventID, leaves[i].Key, l.EventID, l.Key)
		}
	}
	for i, h := range p.OldHashes {
		if hashes[i] != h.Hash {
			return fmt.Errorf("%w: stored hash %d differs", ErrLogConflict, h.Index)
		}
	}
	return nil
}

// CheckCheckpoint checks a checkpoint against a log of this size whose
// hashes r reads: its size is at most the log's, and its root is the tree
// hash of that many leaves.
func CheckCheckpoint(cp Checkpoint, size int64, r tlog.HashReader) error {
	if cp.Size < 0 || cp.Size > size {
		return fmt.Errorf("%w: checkpoint of size %d for a log of %d", ErrLogConflict, cp.Size, size)
	}
	root, err := tlog.TreeHash(cp.Size, r)
	if err != nil {
		return fmt.Errorf("tree hash of size %d: %w", cp.Size, err)
	}
	if root != tlog.Hash(cp.Root) {
		return fmt.Errorf("%w: checkpoint of size %d has another root than the stored log", ErrLogConflict, cp.Size)
	}
	return nil
}

// LogHashes reads a log's stored hashes (LogStore.ReadLogHashes).
type LogHashes interface {
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind LogKind, indexes []int64) ([][32]byte, error)
}

// LogHashReader is the tlog.HashReader of one log of a store.
func LogHashReader(ctx context.Context, s LogHashes, org uuid.UUID, kind LogKind) tlog.HashReader {
	return hashReader(func(indexes []int64) ([][32]byte, error) { return s.ReadLogHashes(ctx, org, kind, indexes) })
}

// FoundHashReader is the tlog.HashReader of hashes already read, by index
// (one absent is ErrNotFound, as a store says it).
func FoundHashReader(found map[int64][32]byte) tlog.HashReader {
	return hashReader(func(indexes []int64) ([][32]byte, error) { return HashesInOrder(indexes, found) })
}

func hashReader(read func(indexes []int64) ([][32]byte, error)) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		hs, err := read(indexes)
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(hs))
		for i := range hs {
			out[i] = hs[i]
		}
		return out, nil
	})
}

// LogHeadsEach reads the heads of several logs of one kind one at a time
// with head (a store's LogHead), as auditstore.LogHeadsReader answers them:
// an empty log absent.
func LogHeadsEach(ctx context.Context, head func(context.Context, uuid.UUID, LogKind) (int64, LogLeaf, error), kind LogKind, orgs []uuid.UUID) (map[uuid.UUID]LogLeaf, error) {
	out := make(map[uuid.UUID]LogLeaf, len(orgs))
	for _, org := range orgs {
		size, last, err := head(ctx, org, kind)
		if err != nil {
			return nil, err
		}
		if size > 0 {
			out[org] = last
		}
	}
	return out, nil
}

// LogReader reads the stored hashes of one log of a store with the
// context of each read (internal/tlog's HashReader, which verifiers and
// the checkpointer take).
type LogReader struct {
	Store LogHashes
	Org   uuid.UUID
	Kind  LogKind
}

// ReadHashes reads the hashes at indexes, in their order.
func (r LogReader) ReadHashes(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	return LogHashReader(ctx, r.Store, r.Org, r.Kind).ReadHashes(indexes)
}

// HashesInOrder returns the hashes of found at indexes, in that order:
// ErrNotFound (wrapped) for the first index found does not hold.
func HashesInOrder(indexes []int64, found map[int64][32]byte) ([][32]byte, error) {
	out := make([][32]byte, len(indexes))
	for i, x := range indexes {
		h, ok := found[x]
		if !ok {
			return nil, fmt.Errorf("stored hash %d: %w", x, ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}

// LogAppend is one log's part of LogAppender.AppendLogs: what AppendLog
// takes.
type LogAppend struct {
	Org    uuid.UUID
	Kind   LogKind
	Leaves []LogLeaf
	Hashes []StoredHash
}

// LogAppender is a LogStore that appends to several logs at once
// (ClickHouse: one insert per table for all of them, where one per log
// made a part of each table per log and round, the most of the log's cost
// to the server). Each append is as AppendLog's, at most one per log; an
// append refused (ErrLogConflict, ErrInvalidQuery) is reported in the
// error (errors.Join, each naming its log) and the others are written.
// Nothing is durable before it returns nil, but what it wrote of the
// others before an error is as an AppendLog that returned an error.
type LogAppender interface {
	AppendLogs(ctx context.Context, appends []LogAppend) error
}

// LogWriteForgetter is a store that remembers where its own appends left
// each log, to skip what only another writer's crashed append makes
// necessary (ClickHouse: reading the rows left above a log's head).
// ForgetLogWrites makes it read them again for every log: a sequencer calls
// it when it takes the lease, since another instance may have appended,
// and crashed, meanwhile.
type LogWriteForgetter interface {
	ForgetLogWrites()
}

// AppendEach is AppendLogs made of one AppendLog per log, for a store
// whose appends cost little each (SQLite).
func AppendEach(ctx context.Context, s LogStore, appends []LogAppend) error {
	var errs []error
	seen := map[[17]byte]bool{}
	for _, a := range appends {
		k := [17]byte(append(a.Org[:], byte(a.Kind)))
		if seen[k] {
			errs = append(errs, fmt.Errorf("%w: log %s/%s appended twice in one call", ErrInvalidQuery, a.Org, a.Kind))
			continue
		}
		seen[k] = true
		if err := s.AppendLog(ctx, a.Org, a.Kind, a.Leaves, a.Hashes); err != nil {
			errs = append(errs, fmt.Errorf("log %s/%s: %w", a.Org, a.Kind, err))
		}
	}
	return errors.Join(errs...)
}

// LogCheckpoint is a checkpoint of one log, for SaveCheckpoints.
type LogCheckpoint struct {
	Org        uuid.UUID
	Kind       LogKind
	Checkpoint Checkpoint
}

// CheckpointSaver is a LogStore that stores checkpoints of several logs at
// once (ClickHouse: one insert for a round's checkpoints, where one each
// made a part per log and round). Each is as SaveCheckpoint's: errs[i] is
// the i-th's (nil: stored).
type CheckpointSaver interface {
	SaveCheckpoints(ctx context.Context, cps []LogCheckpoint) (errs []error)
}

// SaveEach is SaveCheckpoints made of one SaveCheckpoint per checkpoint,
// for a store whose writes cost little each (SQLite).
func SaveEach(ctx context.Context, s LogStore, cps []LogCheckpoint) []error {
	errs := make([]error, len(cps))
	for i, c := range cps {
		errs[i] = s.SaveCheckpoint(ctx, c.Org, c.Kind, c.Checkpoint)
	}
	return errs
}
