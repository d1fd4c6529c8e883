package cpstate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
)

func dur(d time.Duration) *time.Duration { return &d }

func TestParseAndFormatRetention(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		format string // FormatRetention(want); "" when an error is expected
		errHas string
	}{
		{"0", 0, "0", ""},
		{"0d", 0, "0", ""},
		{"0s", 0, "0", ""},
		{"400d", 400 * Day, "400d", ""},
		{" 30d ", 30 * Day, "30d", ""},
		{"36h", 36 * time.Hour, "36h", ""},
		{"48h", 2 * Day, "2d", ""},
		{"90m", 90 * time.Minute, "90m", ""},
		{"120m", 2 * time.Hour, "2h", ""},
		{"36h0m0s", 36 * time.Hour, "36h", ""},
		{"1h30m", 90 * time.Minute, "90m", ""},
		{"1.5h", 90 * time.Minute, "90m", ""},
		{"90s", 90 * time.Second, "1m30s", ""},
		{"36500d", MaxRetention, "36500d", ""},
		{"40x", 0, "", `"40x" is not a duration like "400d", "36h", "90m"`},
		{"", 0, "", "is not a duration"},
		{"d", 0, "", "is not a duration"},
		{"1.5d", 0, "", "is not a duration"},
		{"-5d", 0, "", "is not a duration"},
		{"-5h", 0, "", "negative"},
		{"36501d", 0, "", "longer than 36500d"},
		{"99999999999999999999d", 0, "", "longer than 36500d"},
		{"900000h", 0, "", "longer than 36500d"},
	}
	for _, tt := range tests {
		got, err := ParseRetention(tt.in)
		if tt.errHas != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.errHas) || strings.HasPrefix(err.Error(), "invalid") {
				t.Errorf("ParseRetention(%q) = %v, %v; want an ErrInvalid containing %q", tt.in, got, err, tt.errHas)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		f := FormatRetention(got)
		if f != tt.format {
			t.Errorf("FormatRetention(%v) = %q, want %q", got, f, tt.format)
		}
		if back, err := ParseRetention(f); err != nil || back != got {
			t.Errorf("ParseRetention(FormatRetention(%v) = %q) = %v, %v", got, f, back, err)
		}
	}
}

func TestRetentionBoundsValidate(t *testing.T) {
	tests := []struct {
		name string
		b    RetentionBounds
		ok   bool
	}{
		{"default", DefaultRetentionBounds(), true},
		{"zero", RetentionBounds{}, true},
		{"min only, default forever", RetentionBounds{Min: 30 * Day}, true},
		{"min, max, default within", RetentionBounds{Min: 30 * Day, Max: 400 * Day, Default: 90 * Day}, true},
		{"default at the bounds", RetentionBounds{Min: 30 * Day, Max: 400 * Day, Default: 400 * Day}, true},
		{"max equals min", RetentionBounds{Min: 30 * Day, Max: 30 * Day, Default: 30 * Day}, true},
		{"grace 0", RetentionBounds{Grace: 0, Default: Day}, true},
		{"negative min", RetentionBounds{Min: -1}, false},
		{"negative grace", RetentionBounds{Grace: -time.Hour}, false},
		{"negative default", RetentionBounds{Default: -time.Hour}, false},
		{"max below min", RetentionBounds{Min: 30 * Day, Max: 10 * Day, Default: 20 * Day}, false},
		{"default forever with a max", RetentionBounds{Max: 400 * Day}, false},
		{"default below min", RetentionBounds{Min: 30 * Day, Default: 10 * Day}, false},
		{"default above max", RetentionBounds{Max: 30 * Day, Default: 40 * Day}, false},
	}
	for _, tt := range tests {
		err := tt.b.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

func TestRetentionBoundsCheck(t *testing.T) {
	capped := RetentionBounds{Min: 30 * Day, Max: 400 * Day, Default: 90 * Day}
	open := RetentionBounds{Min: 30 * Day}
	tests := []struct {
		name   string
		b      RetentionBounds
		v      *time.Duration
		errHas string // "" = accepted
	}{
		{"within", capped, dur(100 * Day), ""},
		{"at min", capped, dur(30 * Day), ""},
		{"at max", capped, dur(400 * Day), ""},
		{"below min", capped, dur(29 * Day), "audit_logs: 29d is below the operator's minimum of 30d"},
		{"above max", capped, dur(401 * Day), "audit_logs: 401d is above the operator's maximum of 400d"},
		{"forever with a max", capped, nil, "audit_logs: keep forever (null) is above the operator's maximum of 400d"},
		{"zero is forever", capped, dur(0), "keep forever"},
		{"forever without a max", open, nil, ""},
		{"long without a max", open, dur(10000 * Day), ""},
		{"below min without a max", open, dur(time.Hour), "is below the operator's minimum of 30d"},
		{"negative", open, dur(-time.Hour), "negative"},
	}
	for _, tt := range tests {
		err := tt.b.Check("audit_logs", tt.v)
		if tt.errHas == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: Check = %v, want %q", tt.name, err, tt.errHas)
		}
	}
}

func TestRetentionEffective(t *testing.T) {
	now := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	before, after := now.Add(time.Hour), now.Add(-time.Hour) // AppliesFrom still ahead / passed
	def := RetentionBounds{Default: 90 * Day, Grace: Day}
	capped := RetentionBounds{Min: 30 * Day, Max: 400 * Day, Default: 90 * Day, Grace: Day}
	tests := []struct {
		name string
		b    RetentionBounds
		r    *Retention
		kind string
		want time.Duration
	}{
		{"no setting: the default", def, nil, RetentionAuditLogs, 90 * Day},
		{"no setting, default forever", RetentionBounds{}, nil, RetentionToolExecutions, 0},
		{"unknown kind: forever", def, &Retention{AuditLogs: dur(Day), AppliesFrom: after}, "other", 0},
		{"after applies_from: the new value", def,
			&Retention{AuditLogs: dur(10 * Day), PreviousAuditLogs: dur(400 * Day), PreviousSet: true, AppliesFrom: after}, RetentionAuditLogs, 10 * Day},
		{"exactly at applies_from: the new value", def,
			&Retention{AuditLogs: dur(10 * Day), PreviousAuditLogs: dur(400 * Day), PreviousSet: true, AppliesFrom: now}, RetentionAuditLogs, 10 * Day},
		{"grace, shorter new: the previous", def,
			&Retention{AuditLogs: dur(10 * Day), PreviousAuditLogs: dur(400 * Day), PreviousSet: true, AppliesFrom: before}, RetentionAuditLogs, 400 * Day},
		{"grace, longer new: the new at once", def,
			&Retention{AuditLogs: dur(400 * Day), PreviousAuditLogs: dur(10 * Day), PreviousSet: true, AppliesFrom: before}, RetentionAuditLogs, 400 * Day},
		{"grace, forever before: forever", def,
			&Retention{AuditLogs: dur(10 * Day), PreviousAuditLogs: nil, PreviousSet: true, AppliesFrom: before}, RetentionAuditLogs, 0},
		{"grace, forever new: forever", def,
			&Retention{AuditLogs: nil, PreviousAuditLogs: dur(10 * Day), PreviousSet: true, AppliesFrom: before}, RetentionAuditLogs, 0},
		{"grace, no previous setting: the default", def,
			&Retention{ToolExecutions: dur(10 * Day), AppliesFrom: before}, RetentionToolExecutions, 90 * Day},
		{"grace, no previous setting, longer new", def,
			&Retention{ToolExecutions: dur(100 * Day), AppliesFrom: before}, RetentionToolExecutions, 100 * Day},
		{"grace, per kind", def,
			&Retention{AuditLogs: dur(10 * Day), ToolExecutions: dur(5 * Day), PreviousAuditLogs: dur(20 * Day), PreviousToolExecutions: dur(2 * Day),
				PreviousSet: true, AppliesFrom: before}, RetentionToolExecutions, 5 * Day},
		{"clamped up to min", capped, &Retention{AuditLogs: dur(Day), AppliesFrom: after}, RetentionAuditLogs, 30 * Day},
		{"clamped down to max", capped, &Retention{AuditLogs: dur(1000 * Day), AppliesFrom: after}, RetentionAuditLogs, 400 * Day},
		{"forever becomes max", capped, &Retention{AuditLogs: nil, AppliesFrom: after}, RetentionAuditLogs, 400 * Day},
		{"forever during grace becomes max", capped,
			&Retention{AuditLogs: dur(40 * Day), PreviousAuditLogs: nil, PreviousSet: true, AppliesFrom: before}, RetentionAuditLogs, 400 * Day},
		{"min without max", RetentionBounds{Min: 30 * Day}, &Retention{AuditLogs: dur(Day), AppliesFrom: after}, RetentionAuditLogs, 30 * Day},
		{"forever without max stays forever", RetentionBounds{Min: 30 * Day}, &Retention{AppliesFrom: after}, RetentionAuditLogs, 0},
	}
	for _, tt := range tests {
		if got := tt.b.Effective(tt.r, tt.kind, now); got != tt.want {
			t.Errorf("%s: Effective = %s, want %s", tt.name, FormatRetention(got), FormatRetention(tt.want))
		}
	}
}

func TestLegalHoldActive(t *testing.T) {
	now := time.Now()
	if !(LegalHold{}).Active() || (LegalHold{ReleasedAt: &now}).Active() {
		t.Fatal("Active")
	}
	if RetentionKey("o") != "retention.o" || LegalHoldKey("o", "h") != "hold.o.h" || !strings.HasPrefix(LegalHoldKey("o", "h"), LegalHoldPrefix("o")) {
		t.Fatal("keys")
	}
}

// The settings round-trip through the bucket: RetentionOf and LegalHolds
// read what was committed, of one organization only.
func TestLifecycleSettingsRoundTrip(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := DefaultStateConfig()
	cfg.Bucket = "cp_lifecycle"
	s, err := OpenState(ctx, js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	org, other := uuid.New(), uuid.New()
	if r, err := RetentionOf(s, org); r != nil || err != nil {
		t.Fatalf("no setting: %v, %v", r, err)
	}
	if h, err := LegalHolds(s, org); len(h) != 0 || err != nil {
		t.Fatalf("no holds: %v, %v", h, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := Retention{OrgID: org, AuditLogs: dur(400 * Day), ToolExecutions: nil, PreviousAuditLogs: dur(90 * Day), PreviousSet: true,
		AppliesFrom: now.Add(Day), UpdatedAt: now}
	since := now.Add(-Day)
	held := LegalHold{ID: uuid.New(), OrgID: org, Name: "dispute", Q: "actor:bob", Since: &since, Kinds: []string{RetentionAuditLogs},
		CreatedAt: now, CreatedBy: "alice"}
	released := LegalHold{ID: uuid.New(), OrgID: org, Name: "old", Kinds: []string{RetentionAuditLogs, RetentionToolExecutions},
		CreatedAt: now, CreatedBy: "alice", ReleasedAt: &now}
	elsewhere := LegalHold{ID: uuid.New(), OrgID: other, Name: "other", Kinds: []string{RetentionToolExecutions}, CreatedAt: now}
	writes := []Write{SetKey(RetentionKey(org.String()), r, 0)}
	for _, h := range []LegalHold{held, released, elsewhere} {
		writes = append(writes, SetKey(LegalHoldKey(h.OrgID.String(), h.ID.String()), h, 0))
	}
	if err := s.Commit(ctx, writes, nil); err != nil {
		t.Fatal(err)
	}
	got, err := RetentionOf(s, org)
	if err != nil || got == nil || !sameDur(got.AuditLogs, r.AuditLogs) || got.ToolExecutions != nil || !sameDur(got.PreviousAuditLogs, r.PreviousAuditLogs) ||
		got.PreviousToolExecutions != nil || !got.PreviousSet || !got.AppliesFrom.Equal(r.AppliesFrom) || !got.UpdatedAt.Equal(now) || got.OrgID != org {
		t.Fatalf("RetentionOf = %+v, %v; want %+v", got, err, r)
	}
	if r, err := RetentionOf(s, other); r != nil || err != nil {
		t.Fatalf("other org: %v, %v", r, err)
	}
	holds, err := LegalHolds(s, org)
	if err != nil || len(holds) != 2 {
		t.Fatalf("LegalHolds = %+v, %v", holds, err)
	}
	for _, want := range []LegalHold{held, released} {
		i := slices.IndexFunc(holds, func(h LegalHold) bool { return h.ID == want.ID })
		if i < 0 {
			t.Fatalf("hold %s missing", want.Name)
		}
		h := holds[i]
		if h.Name != want.Name || h.Q != want.Q || h.Active() != want.Active() || !slices.Equal(h.Kinds, want.Kinds) || h.CreatedBy != want.CreatedBy ||
			(want.Since != nil) != (h.Since != nil) || (h.Since != nil && !h.Since.Equal(*want.Since)) || h.Until != nil {
			t.Fatalf("hold %+v, want %+v", h, want)
		}
	}
}

func sameDur(a, b *time.Duration) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
