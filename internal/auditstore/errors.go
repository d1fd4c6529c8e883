package auditstore

import "errors"

// Write errors that the backends classify, so that ingest can tell a batch
// the store refuses (split it, dead-letter the rows it refuses) from a store
// that cannot take writes for now (back off and write the batch again).
var (
	// ErrRefused marks a write refused because of the rows themselves (a
	// constraint of the schema, a value the column type cannot hold):
	// writing the same rows again fails again.
	ErrRefused = errors.New("refused by the store")
	// ErrBusy marks a write refused because the store is overloaded or
	// locked (too many parts, memory limit, database locked): the same rows
	// are accepted later.
	ErrBusy = errors.New("store busy")
)

// ErrInsertFull marks a block that an open Insert cannot take without
// breaking a limit of the store (too many partitions in one insert): the
// caller commits the insert and writes the block in a new one. Nothing of
// the block was written.
var ErrInsertFull = errors.New("the insert is full")

// ErrNoInserts answers a request for a streamed Insert of a store that
// writes batch by batch (SQLite): the caller writes each batch on its own.
var ErrNoInserts = errors.New("the store takes no streamed inserts")
