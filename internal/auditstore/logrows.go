package auditstore

import "github.com/google/uuid"

// ScanIDs reads rows of one column, a UUID as its canonical string: the
// organizations of a log kind, as both SQL backends list them.
func ScanIDs(rows Rows) ([]uuid.UUID, error) {
	var out []uuid.UUID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// ScanIDInts reads rows of two columns, a UUID as its canonical string and
// an integer, into out (a later row of an id wins): the heads of the logs,
// the leaf indexes of events. N is the type the driver scans the integer
// column into (ClickHouse scans a UInt64 only into a uint64).
func ScanIDInts[N int64 | uint64](rows Rows, out map[uuid.UUID]int64) error {
	for rows.Next() {
		var (
			id string
			n  N
		)
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		u, err := uuid.Parse(id)
		if err != nil {
			return err
		}
		out[u] = int64(n)
	}
	return rows.Err()
}
