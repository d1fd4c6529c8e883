package apiitem_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// BenchmarkAuditLeaf is what ingest spends on each entry's leaf (version
// 2: the entry has a salt).
func BenchmarkAuditLeaf(b *testing.B) {
	g := synth.New(uuid.New(), 3, 1)
	ev := g.Event(time.Now())
	if err := ev.EnsureSalt(); err != nil {
		b.Fatal(err)
	}
	e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: time.Now()}
	var l apiitem.Leaves
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.AuditLeaf(&e); err != nil {
			b.Fatal(err)
		}
	}
}
