package cpstate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestErasureKeys(t *testing.T) {
	if ErasureKey("o", "e") != "erasure.o.e" || ErasurePrefix("o") != "erasure.o." || !strings.HasPrefix(ErasureKey("o", "e"), ErasurePrefix("o")) {
		t.Fatal("keys")
	}
	if !(Erasure{Status: ErasurePending}).Pending() || (Erasure{Status: ErasureDone}).Pending() || (Erasure{Status: ErasureRefused}).Pending() {
		t.Fatal("Pending")
	}
}

// Erasures lists one organization's erasures of any status, in key
// order; PendingErasures the pending ones of every organization; other
// keys (legal holds) are not read as erasures.
func TestErasuresRoundTrip(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := DefaultStateConfig()
	cfg.Bucket = "cp_erasures"
	s, err := OpenState(ctx, js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	org, other := uuid.New(), uuid.New()
	if l, err := Erasures(s, org); err != nil || len(l) != 0 {
		t.Fatalf("none: %v, %v", l, err)
	}
	if l, err := PendingErasures(s); err != nil || len(l) != 0 {
		t.Fatalf("none pending: %v, %v", l, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(org uuid.UUID, id, status, subject string) Erasure {
		e := Erasure{ID: uuid.MustParse(id), OrgID: org, SubjectKind: ErasureUserID, Subject: subject, Reason: "r",
			Pseudonym: "erased-0123456789abcdef", Status: status, CreatedAt: now, CreatedBy: "carol"}
		if status != ErasurePending {
			e.DoneAt, e.AuditEntries, e.Executions = &now, 4, 1
		}
		return e
	}
	es := []Erasure{
		mk(org, "20000000-0000-4000-8000-000000000000", ErasurePending, "bob"),
		mk(org, "10000000-0000-4000-8000-000000000000", ErasureDone, ""),
		mk(org, "30000000-0000-4000-8000-000000000000", ErasureRefused, ""),
		mk(other, "40000000-0000-4000-8000-000000000000", ErasurePending, "eve"),
	}
	writes := []Write{SetKey(LegalHoldKey(org.String(), uuid.NewString()), LegalHold{OrgID: org, Name: "h"}, 0)}
	for _, e := range es {
		writes = append(writes, SetKey(ErasureKey(e.OrgID.String(), e.ID.String()), e, 0))
	}
	if err := s.Commit(ctx, writes, nil); err != nil {
		t.Fatal(err)
	}
	got, err := Erasures(s, org)
	if err != nil || len(got) != 3 || got[0].ID != es[1].ID || got[1].ID != es[0].ID || got[2].ID != es[2].ID {
		t.Fatalf("Erasures = %+v, %v", got, err)
	}
	if got[1].Subject != "bob" || got[1].SubjectKind != ErasureUserID || got[0].Subject != "" || got[0].DoneAt == nil ||
		!got[0].DoneAt.Equal(now) || got[0].AuditEntries != 4 || got[0].Executions != 1 || got[1].DoneAt != nil {
		t.Fatalf("decoded: %+v", got)
	}
	pending, err := PendingErasures(s)
	if err != nil || len(pending) != 2 {
		t.Fatalf("PendingErasures = %+v, %v", pending, err)
	}
	seen := map[string]bool{}
	for _, e := range pending {
		seen[e.Subject] = e.Status == ErasurePending
	}
	if !seen["bob"] || !seen["eve"] {
		t.Fatalf("pending: %+v", pending)
	}
}
