package clickhouse

import "time"

// SetKeepLiteralMax sets how many kept ids a deletion carries as literals
// (above: lifecycle_keep) until the returned func restores it.
func SetKeepLiteralMax(n int) (restore func()) {
	old := keepLiteralMax
	keepLiteralMax = n
	return func() { keepLiteralMax = old }
}

// OnExpiryMutating makes DeleteExpired call f once it has created its
// mutations, before it waits for them, until the returned func restores it.
func OnExpiryMutating(f func()) (restore func()) {
	old := expiryMutating
	expiryMutating = f
	return func() { expiryMutating = old }
}

// RemnantReads is how many reads of the rows that crashed appends left
// above the heads s has made.
func RemnantReads(s *Store) int64 { return s.remnantReads.Load() }

// SetClock makes s read the time from now (the time of its writes and of
// its hourly counts).
func SetClock(s *Store, now func() time.Time) { s.now = now }
