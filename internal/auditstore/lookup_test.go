package auditstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
)

func TestLookupWindow(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 4, 5, 123e6, time.UTC)
	at := now.Add(-3 * time.Hour)
	tests := []struct {
		name   string
		id     uuid.UUID
		lo, hi int64
	}{
		{"v7: around the id's time", storetest.V7At(at), at.Add(-10 * time.Minute).UnixMilli(), at.Add(10 * time.Minute).UnixMilli()},
		{"v7 of now", storetest.V7At(now), now.Add(-10 * time.Minute).UnixMilli(), now.Add(10 * time.Minute).UnixMilli()},
		{"v4: the last hour", uuid.New(), now.Add(-time.Hour).UnixMilli(), math.MaxInt64},
		{"nil: the last hour", uuid.Nil, now.Add(-time.Hour).UnixMilli(), math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := auditstore.LookupWindow(tc.id, now)
			if lo != tc.lo || hi != tc.hi {
				t.Fatalf("window [%d, %d), want [%d, %d)", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}
