package auditstore

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"
)

// PlanAppend splits an append at the log's size and refuses what no
// correct sequencer writes.
func TestPlanAppend(t *testing.T) {
	leaves := func(first, n int64) []LogLeaf {
		out := make([]LogLeaf, n)
		for i := range out {
			out[i] = LogLeaf{Index: first + int64(i), EventID: uuid.New()}
		}
		return out
	}
	hashes := func(first, end int64) []StoredHash {
		var out []StoredHash
		for x := tlog.StoredHashCount(first); x < tlog.StoredHashCount(end); x++ {
			out = append(out, StoredHash{Index: x})
		}
		return out
	}
	dup := leaves(4, 3)
	dup[2].EventID = dup[0].EventID
	gap := leaves(4, 3)
	gap[1].Index = 9
	for _, tc := range []struct {
		name            string
		size            int64
		leaves          []LogLeaf
		hashes          []StoredHash
		old, oldHashes  int
		news, newHashes int
		newSize         int64
		err             error
	}{
		{"first append", 0, leaves(0, 5), hashes(0, 5), 0, 0, 5, 8, 5, nil},
		{"next append", 5, leaves(5, 3), hashes(5, 8), 0, 0, 3, 7, 8, nil},
		{"all stored", 8, leaves(5, 3), hashes(5, 8), 3, 7, 0, 0, 8, nil},
		{"overlapping", 7, leaves(5, 3), hashes(5, 8), 2, 3, 1, 4, 8, nil},
		{"nothing", 3, nil, nil, 0, 0, 0, 0, 3, nil},
		{"a gap", 4, leaves(5, 3), hashes(5, 8), 0, 0, 0, 0, 0, ErrLogConflict},
		{"an event twice", 4, dup, hashes(4, 7), 0, 0, 0, 0, 0, ErrLogConflict},
		{"indexes apart", 4, gap, hashes(4, 7), 0, 0, 0, 0, 0, ErrInvalidQuery},
		{"a hash short", 4, leaves(4, 3), hashes(4, 7)[1:], 0, 0, 0, 0, 0, ErrInvalidQuery},
		{"a hash too many", 4, leaves(4, 3), hashes(3, 7), 0, 0, 0, 0, 0, ErrInvalidQuery},
		{"hashes alone", 4, nil, hashes(4, 5), 0, 0, 0, 0, 0, ErrInvalidQuery},
		{"negative index", 0, leaves(-1, 2), hashes(0, 1), 0, 0, 0, 0, 0, ErrInvalidQuery},
		{"nil event", 0, []LogLeaf{{Index: 0}}, hashes(0, 1), 0, 0, 0, 0, 0, ErrInvalidQuery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanAppend(tc.size, tc.leaves, tc.hashes)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("PlanAppend = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Old) != tc.old || len(p.OldHashes) != tc.oldHashes || len(p.New) != tc.news || len(p.NewHashes) != tc.newHashes || p.Size(tc.size) != tc.newSize {
				t.Fatalf("plan: %d+%d old, %d+%d new, size %d; want %d+%d, %d+%d, %d",
					len(p.Old), len(p.OldHashes), len(p.New), len(p.NewHashes), p.Size(tc.size), tc.old, tc.oldHashes, tc.news, tc.newHashes, tc.newSize)
			}
			if len(p.NewHashes) > 0 && p.NewHashes[0].Index != tlog.StoredHashCount(tc.size) {
				t.Fatalf("new hashes start at %d, want %d", p.NewHashes[0].Index, tlog.StoredHashCount(tc.size))
			}
		})
	}
}
