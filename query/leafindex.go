package query

import (
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// leafIndex is the index of id in m as a leaf_index (nil: not in the log).
func leafIndex(m map[uuid.UUID]int64, id uuid.UUID) *int64 {
	if x, ok := m[id]; ok {
		return &x
	}
	return nil
}

// eventIDs are the event ids of audit entries.
func eventIDs(es []schemas.AuditEntry) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i := range es {
		out[i] = es[i].EventID
	}
	return out
}

// execEventIDs are the event ids of executions (an id that does not parse
// has no leaf).
func execEventIDs(es []auditstore.Execution) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(es))
	for i := range es {
		if id, err := uuid.Parse(es[i].EventID); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// execLeafIndex is leafIndex for an execution's event id.
func execLeafIndex(m map[uuid.UUID]int64, id string) *int64 {
	if len(m) == 0 {
		return nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return nil
	}
	return leafIndex(m, u)
}
