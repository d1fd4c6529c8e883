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
