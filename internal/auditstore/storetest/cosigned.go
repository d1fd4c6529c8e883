package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// testCheckpointCosigned: a checkpoint saved again with more signature
// lines (witnesses' cosignatures, added after it was first stored: the
// same size, root and time, a longer note) replaces the stored one; saved
// again with fewer, it does not.
func testCheckpointCosigned(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	leaves, hashes := m.Add(t, 4)
	appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
	at := time.Now().Truncate(time.Millisecond).UTC()
	own := auditstore.Checkpoint{Size: 4, Root: m.Root(t, 4), Time: at, KeyID: "k1", Note: []byte("body\n\n— log sig\n")}
	one, two := own, own
	one.Note = append(bytes.Clone(own.Note), "— witness-a sig\n"...)
	two.Note = append(bytes.Clone(one.Note), "— witness-b sig\n"...)
	for i, c := range []auditstore.Checkpoint{own, one, two, one, own} {
		if err := s.SaveCheckpoint(ctx(t), org, auditstore.LogAudit, c); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	got, ok, err := s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit)
	if err != nil || !ok || !bytes.Equal(got.Note, two.Note) {
		t.Fatalf("LatestCheckpoint = %q, %v, %v; want the note with both cosignatures", got.Note, ok, err)
	}
	got, ok, err = s.CheckpointAt(ctx(t), org, auditstore.LogAudit, 4)
	if err != nil || !ok || !bytes.Equal(got.Note, two.Note) {
		t.Fatalf("CheckpointAt = %q, %v, %v; want the note with both cosignatures", got.Note, ok, err)
	}
	// A newer checkpoint of the size (the hourly one) still replaces it.
	newer := own
	newer.Time = at.Add(time.Hour)
	if err := s.SaveCheckpoint(ctx(t), org, auditstore.LogAudit, newer); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit); !got.Time.Equal(newer.Time) {
		t.Fatalf("the newer checkpoint did not replace the cosigned one: %v", got.Time)
	}
}
