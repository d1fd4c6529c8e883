package query

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/httpapi"
)

func TestCursorRoundTripAndRejections(t *testing.T) {
	k1, k2 := []byte("0123456789abcdef0123"), []byte("fedcba9876543210fedc")
	codec, err := NewCursorCodec(k1)
	if err != nil {
		t.Fatal(err)
	}
	scope := Scope("audit_logs/org", uuid.NewString(), "", "AUDIT_ACTION_CREATED", "", "")
	key := auditstore.Key{Timestamp: time.UnixMilli(1_790_000_000_123).UTC(), EventID: uuid.New()}
	c := codec.Encode(key, scope)
	got, err := codec.Decode(c, scope)
	if err != nil || got != key {
		t.Fatalf("round trip: %+v %v", got, err)
	}

	raw, _ := base64.RawURLEncoding.DecodeString(c)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tests := []struct {
		name   string
		cursor string
		scope  [scopeLen]byte
		want   error
	}{
		{"tampered timestamp", flip(3), scope, ErrCursorSignature},
		{"tampered event id", flip(12), scope, ErrCursorSignature},
		{"tampered mac", flip(len(raw) - 1), scope, ErrCursorSignature},
		{"other scope", c, Scope("audit_logs/org", uuid.NewString(), "", "", "", ""), ErrCursorScope},
		{"other filters", c, Scope("audit_logs/org", "x", "", "AUDIT_ACTION_DELETED", "", ""), ErrCursorScope},
		{"not base64", "%%%", scope, ErrCursorMalformed},
		{"padded", c + "==", scope, ErrCursorMalformed},
		{"standard alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(c) + "+/", scope, ErrCursorMalformed},
		{"truncated", c[:len(c)-4], scope, ErrCursorMalformed},
		{"empty", "", scope, ErrCursorMalformed},
	}
	for _, tc := range tests {
		if _, err := codec.Decode(tc.cursor, tc.scope); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}

	// After a rotation the old key still verifies; a codec without it does not.
	rotated, _ := NewCursorCodec(k2, k1)
	if _, err := rotated.Decode(c, scope); err != nil {
		t.Errorf("rotated codec refuses an old cursor: %v", err)
	}
	fresh, _ := NewCursorCodec(k2)
	if _, err := fresh.Decode(c, scope); !errors.Is(err, ErrCursorSignature) {
		t.Errorf("codec without the old key: %v", err)
	}
	if _, err := NewCursorCodec([]byte("short")); err == nil {
		t.Error("short key accepted")
	}
}

func FuzzCursorDecode(f *testing.F) {
	codec, _ := NewCursorCodec([]byte("0123456789abcdef0123"))
	scope := Scope("s")
	f.Add(codec.Encode(auditstore.Key{Timestamp: time.Now(), EventID: uuid.New()}, scope))
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := codec.Decode(s, scope)
		if err != nil {
			return
		}
		// Whatever verifies re-encodes to a cursor that decodes to the same key.
		again, err := codec.Decode(codec.Encode(k, scope), scope)
		if err != nil || again != k {
			t.Fatalf("accepted cursor %q does not round trip: %v", s, err)
		}
	})
}

func TestParseList(t *testing.T) {
	org, proj := uuid.NewString(), uuid.NewString()
	get := func(m map[string]string) Getter { return func(k string) string { return m[k] } }
	tests := []struct {
		name      string
		path, q   map[string]string
		project   bool
		wantParam string
		check     func(p ListParams) bool
	}{
		{"defaults", map[string]string{"org_id": org}, nil, false, "", func(p ListParams) bool {
			return p.Limit == 50 && p.Action == nil && p.ProjectID == nil
		}},
		{"all filters", map[string]string{"org_id": org, "project_id": proj}, map[string]string{
			"action": "AUDIT_ACTION_DELETED", "source": "AUDIT_SOURCE_SYSTEM", "resource_type": "RESOURCE_TYPE_SETTING", "limit": "100"}, true,
			"", func(p ListParams) bool {
				return p.Limit == 100 && *p.Action == 3 && *p.Source == 5 && *p.ResourceType == 17 && p.ProjectID.String() == proj
			}},
		{"bad org", map[string]string{"org_id": "abc"}, nil, false, "org_id", nil},
		{"org in braces", map[string]string{"org_id": "{" + org + "}"}, nil, false, "org_id", nil},
		{"bad project", map[string]string{"org_id": org, "project_id": "x"}, nil, true, "project_id", nil},
		{"limit zero", map[string]string{"org_id": org}, map[string]string{"limit": "0"}, false, "limit", nil},
		{"limit 101", map[string]string{"org_id": org}, map[string]string{"limit": "101"}, false, "limit", nil},
		{"limit float", map[string]string{"org_id": org}, map[string]string{"limit": "1.5"}, false, "limit", nil},
		{"lowercase action", map[string]string{"org_id": org}, map[string]string{"action": "audit_action_created"}, false, "action", nil},
		{"unknown source", map[string]string{"org_id": org}, map[string]string{"source": "AUDIT_SOURCE_FAX"}, false, "source", nil},
		{"numeric resource type", map[string]string{"org_id": org}, map[string]string{"resource_type": "5"}, false, "resource_type", nil},
		{"wait_for", map[string]string{"org_id": org}, map[string]string{"wait_for": proj}, false, "", func(p ListParams) bool {
			return p.WaitFor != nil && p.WaitFor.String() == proj
		}},
		{"no wait_for", map[string]string{"org_id": org}, nil, false, "", func(p ListParams) bool { return p.WaitFor == nil }},
		{"malformed wait_for", map[string]string{"org_id": org}, map[string]string{"wait_for": "123"}, false, "wait_for", nil},
		{"wait_for in braces", map[string]string{"org_id": org}, map[string]string{"wait_for": "{" + proj + "}"}, false, "wait_for", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseList(get(tc.path), get(tc.q), tc.project)
			if tc.wantParam != "" {
				if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), tc.wantParam) {
					t.Fatalf("err = %v, want a bad %s", err, tc.wantParam)
				}
				return
			}
			if err != nil || !tc.check(p) {
				t.Fatalf("%+v %v", p, err)
			}
		})
	}
}

func TestParseExecListUser(t *testing.T) {
	org := uuid.NewString()
	get := func(m map[string]string) Getter { return func(k string) string { return m[k] } }
	path := get(map[string]string{"org_id": org})
	bob, err := ParseExecList(path, get(map[string]string{"user_id": "bob"}), false)
	if err != nil || bob.UserID == nil || *bob.UserID != "bob" {
		t.Fatalf("user_id=bob: %+v %v", bob, err)
	}
	all, _ := ParseExecList(path, get(nil), false)
	alice, _ := ParseExecList(path, get(map[string]string{"user_id": "alice"}), false)
	// A cursor of one user's listing is refused on another's, or on all.
	if bob.Scope("x") == all.Scope("x") || bob.Scope("x") == alice.Scope("x") {
		t.Fatal("the user filter does not change the cursor scope")
	}
	if _, err := ParseExecList(path, get(map[string]string{"user_id": strings.Repeat("u", 257)}), false); !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), "user_id") {
		t.Fatalf("long user_id: %v", err)
	}
	// wait_for does not change the result set: a cursor stays good with it.
	id := uuid.NewString()
	waiting, err := ParseExecList(path, get(map[string]string{"user_id": "bob", "wait_for": id}), false)
	if err != nil || waiting.WaitFor == nil || waiting.WaitFor.String() != id || waiting.Scope("x") != bob.Scope("x") {
		t.Fatalf("wait_for: %+v %v", waiting, err)
	}
	if _, err := ParseExecList(path, get(map[string]string{"wait_for": "not-a-uuid"}), false); !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), "wait_for") {
		t.Fatalf("malformed wait_for: %v", err)
	}
}

// The parameters of an export are read by its body writer after the
// handler returned, when fasthttp may have reused the request's memory
// (fiber's c.Query is a view of it): ParseExecList and parseFormat answer
// strings of their own.
func TestParamsOwnTheirStrings(t *testing.T) {
	org := uuid.NewString()
	mem := []byte("user-one jsonl")
	view := func(i, j int) string { return unsafe.String(&mem[i], j-i) } // as c.Query answers
	p, err := ParseExecList(func(string) string { return org }, func(k string) string {
		if k == "user_id" {
			return view(0, 8)
		}
		return ""
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	format, err := parseFormat(view(9, 14))
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "user-two csvxx") // the connection's next request
	if *p.UserID != "user-one" || format != FormatJSONL {
		t.Fatalf("once the request's memory was reused: user_id %q, format %q", *p.UserID, format)
	}
}

func FuzzParseList(f *testing.F) {
	f.Add(uuid.NewString(), "AUDIT_ACTION_CREATED", "AUDIT_SOURCE_API", "RESOURCE_TYPE_HOOK", "10", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00+01:00", `action:CREATED -ip:10.0.0.0/8 "a b"`)
	f.Add("", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, org, action, source, rt, limit, since, until, search string) {
		q := map[string]string{"action": action, "source": source, "resource_type": rt, "limit": limit, "since": since, "until": until, "q": search}
		p, err := ParseList(func(string) string { return org }, func(k string) string { return q[k] }, false)
		if err != nil {
			if !errors.Is(err, ErrBadParam) {
				t.Fatalf("error %v is not ErrBadParam", err)
			}
			return
		}
		if p.Limit < 1 || p.Limit > MaxLimit {
			t.Fatalf("limit %d accepted", p.Limit)
		}
		if p.Since != nil && p.Until != nil && !p.Since.Before(*p.Until) {
			t.Fatalf("since %v not before until %v accepted", p.Since, p.Until)
		}
	})
}

func TestCheckParams(t *testing.T) {
	tests := []struct {
		query, wantParam string
	}{
		{"", ""},
		{"limit=2&cursor=abc&action=AUDIT_ACTION_CREATED", ""},
		{"limt=2", "limt"},
		{"limit=1&limit=2", "limit"},
		{"limit=", "limit"},
		{"action", "action"},
		{"user_id=u", "user_id"}, // an execution filter on the audit listing
		{"wait_for=" + uuid.NewString() + "&limit=1", ""},
		{"wait_for=", "wait_for"},
		{"q=ada&since=2026-01-02T00:00:00Z&until=2026-01-03T00:00:00Z", ""},
		{"q=a&q=b", "q"},
		{"wait_for=" + uuid.NewString() + "&wait_for=" + uuid.NewString(), "wait_for"},
	}
	for _, tc := range tests {
		var args fasthttp.Args
		args.Parse(tc.query)
		err := httpapi.CheckParams(args.VisitAll, AuditParams)
		if tc.wantParam == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.query, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadParam) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), ErrBadParam.Error()+": "), tc.wantParam+":") {
			t.Errorf("%q: err = %v, want a bad %s", tc.query, err, tc.wantParam)
		}
	}
	var args fasthttp.Args
	args.Parse("action=AUDIT_ACTION_CREATED")
	if err := httpapi.CheckParams(args.VisitAll, ExecutionParams); err == nil {
		t.Error("an audit filter on the execution listing was accepted")
	}
}
