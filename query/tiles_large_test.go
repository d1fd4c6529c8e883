//go:build !race

package query_test

import "testing"

// TestTilesLargeLog on SQLite: the tiles of levels 1 and 2 read from the
// embedded store (left out under the race detector, where building the
// log of 70,000 leaves takes about 20 s; make test runs it there on
// ClickHouse only).
func TestTilesLargeLogSQLite(t *testing.T) {
	t.Parallel()
	largeLog(t, tileStores[0].open(t))
}
