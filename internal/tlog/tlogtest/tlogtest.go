// Package tlogtest builds exports of a log in memory, as the export route
// writes them, for the tests and the benchmark of the verifier. The items
// themselves (apiitem.Item JSON) come from the caller: internal/ does not
// import the components.
package tlogtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/auditrail/auditrail/internal/tlog"
)

// Line is item (a JSON object) with its leaf_index appended, as an export
// line (without the newline).
// A list item's own "leaf_index":null at its end (apiitem.Item before it is
// sequenced) is replaced.
func Line(item []byte, index int64) []byte {
	item = bytes.TrimSuffix(item, []byte(`,"leaf_index":null}`))
	if item[len(item)-1] != '}' {
		item = append(item[:len(item):len(item)], '}')
	}
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
