// Package tlogtest builds exports of a log in memory, as the export route
// writes them, for the tests and the benchmark of the verifier.
package tlogtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// AuditItems renders n synthetic audit events of org as the list route
// returns them (query.Item JSON), one second apart from start.
func AuditItems(org uuid.UUID, n int, seed uint64, start time.Time) [][]byte {
	g := synth.New(org, 3, seed)
	out := make([][]byte, n)
	for i := range out {
		ts := start.Add(time.Duration(i) * time.Second)
		ev := g.Event(ts)
		e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: ts.Add(20 * time.Millisecond)}
		b, err := json.Marshal(query.NewItem(&e))
		if err != nil {
			panic(err)
		}
		out[i] = b
	}
	return out
}

// Line is item (a JSON object) with its leaf_index appended, as an export
// line (without the newline).
func Line(item []byte, index int64) []byte {
	line := make([]byte, 0, len(item)+24)
	line = append(line, item[:len(item)-1]...)
	line = append(line, `,"leaf_index":`...)
	line = strconv.AppendInt(line, index, 10)
	return append(line, '}')
}

// CheckpointLine is the last line of an export: {"checkpoint":"<note>"}.
func CheckpointLine(note []byte) []byte {
	b, _ := json.Marshal(map[string]string{"checkpoint": string(note)})
	return b
}

// Leaves are the leaf hashes of items.
func Leaves(items [][]byte) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(items))
	for i, it := range items {
		e, err := tlog.ParseEntry(nil, it)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = e.Leaf
	}
	return out, nil
}

// Sign signs the checkpoint of the first size leaves.
func Sign(leaves []tlog.Hash, size int64, origin string, at time.Time, key tlog.PrivateKey) ([]byte, error) {
	root := tlog.RootOf(append([]tlog.Hash(nil), leaves[:size]...))
	return tlog.Sign(tlog.Checkpoint{Origin: origin, Size: size, Root: root, Time: at}, key)
}
