package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// witnessVKey is a valid cosignature/v1 vkey named name (a key nobody
// holds here).
func witnessVKey(t *testing.T, name string) string {
	t.Helper()
	pub := sha256.Sum256([]byte("key of " + name))
	k := tlog.WitnessKey{Name: name, Pub: pub[:]}
	h := sha256.Sum256(append(append([]byte(k.Name), '\n', 0x04), pub[:]...)) // the key hash, as C2SP computes it
	k.Hash = uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])
	vkey := k.String()
	if _, err := tlog.ParseWitnessKey(vkey); err != nil {
		t.Fatal(err)
	}
	return vkey
}

// witnessNames resolves the test's names and no other (no DNS).
type witnessNames map[string]string

func (n witnessNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (witnessNames) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

var wNames = witnessNames{"witness.example.com": "93.184.216.34", "rebind.example.com": "127.0.0.1", "corp.example.com": "10.1.2.3",
	"meta.example.com": "169.254.169.254"}

// orgSettingEvents counts the SETTING events of org in the audit stream.
func orgSettingEvents(t *testing.T, js jetstream.JetStream, org string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := schemas.UnmarshalAuditEvent(m.Data)
		if err == nil && ev.OrganizationID.String() == org && ev.ResourceType != nil && *ev.ResourceType == schemas.ResourceTypeSetting {
			n++
		}
	}
	return n
}

// The witness routes, the control plane running with its production NATS
// credentials and the statuses written with the tlog role's: validation
// naming the field, the egress guard (strict: loopback, private, metadata
// and a name resolving to them refused), owners and admins only to change,
// members to read, a key at most once (nor one of the operator's), at most
// eight, each change one SETTING event (nothing for a refusal), the
// operator's witnesses listed first and read-only, the statuses the
// checkpointer wrote — and every answer as admin.yaml says.
func TestWitnessesAPI(t *testing.T) {
	a := testenv.NATSAuth(t)
	n := newNode(t, a.Server.ClientURL(), roleOpts(t, a, natsx.RoleControlPlane))
	n.run()
	strict, err := egress.New(egress.Config{Mode: egress.ModeStrict, Resolver: wNames}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.svc.UseEgress(strict)
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	org := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"}).field("id")
	otherOrg := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "other"}).field("id")
	keyOf := func(org, user, role string) string {
		n.must(201, "PUT", "/api/v1/orgs/"+org+"/members/"+user, bootKey, map[string]any{"role": role})
		return n.must(201, "POST", "/api/v1/orgs/"+org+"/api_keys", bootKey, map[string]any{"name": user, "user_id": user}).field("key")
	}
	owner, adm, member := keyOf(org, "olga", "owner"), keyOf(org, "bob", "admin"), keyOf(org, "alice", "member")
	outsider := keyOf(otherOrg, "carol", "owner")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = n.app.Listener(ln) }()
	t.Cleanup(func() { _ = n.app.Shutdown(); <-done })
	base := "http://" + ln.Addr().String()
	api := newAdminSpec(t, base)
	do := func(method, path, key string, body any, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return api.do(t, req, want)
	}
	list := func(key string) []witnessReply {
		t.Helper()
		var got struct {
			Data []witnessReply `json:"data"`
		}
		if err := json.Unmarshal(do("GET", "/api/v1/orgs/"+org+"/witnesses", key, nil, 200), &got); err != nil {
			t.Fatal(err)
		}
		return got.Data
	}
	ws := "/api/v1/orgs/" + org + "/witnesses"
	vk := witnessVKey(t, "witness.example.com/w1")

	// Before any tlog role ran (no tlog bucket): an empty list.
	if got := list(member); len(got) != 0 {
		t.Fatalf("witnesses of a new organization: %+v", got)
	}

	t.Run("validation", func(t *testing.T) {
		parts := strings.SplitN(vk, "+", 3)
		raw := make([]byte, 33)
		raw[0] = 0x01
		logKey := parts[0] + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(raw) // a log's key (0x01), not a witness's (0x04)
		wrongHash := parts[0] + "+00000000+" + parts[2]
		before := orgSettingEvents(t, admin, org)
		for _, tt := range []struct {
			name, field string
			body        any
		}{
			{"no url", "url", map[string]any{"vkey": vk}},
			{"no vkey", "vkey", map[string]any{"url": "https://witness.example.com"}},
			{"vkey not name+hash+key", "vkey", map[string]any{"url": "https://witness.example.com", "vkey": "witness.example.com"}},
			{"vkey with a wrong hash", "vkey", map[string]any{"url": "https://witness.example.com", "vkey": wrongHash}},
			{"a log's key as vkey", "vkey", map[string]any{"url": "https://witness.example.com", "vkey": logKey}},
			{"ftp", "url", map[string]any{"url": "ftp://witness.example.com", "vkey": vk}},
			{"credentials", "url", map[string]any{"url": "https://u:p@witness.example.com", "vkey": vk}},
			{"a query", "url", map[string]any{"url": "https://witness.example.com/?a=1", "vkey": vk}},
			{"no host", "url", map[string]any{"url": "https:///add", "vkey": vk}},
			{"too long", "url", map[string]any{"url": "https://witness.example.com/" + strings.Repeat("a", maxWitnessURL), "vkey": vk}},
			{"loopback", "url", map[string]any{"url": "http://127.0.0.1:8080", "vkey": vk}},
			{"loopback v6", "url", map[string]any{"url": "http://[::1]:8080", "vkey": vk}},
			{"loopback mapped", "url", map[string]any{"url": "http://[::ffff:127.0.0.1]:8080", "vkey": vk}},
			{"localhost spelled as a number", "url", map[string]any{"url": "http://2130706433/", "vkey": vk}},
			{"private", "url", map[string]any{"url": "https://10.1.2.3/w", "vkey": vk}},
			{"metadata", "url", map[string]any{"url": "http://169.254.169.254/latest", "vkey": vk}},
			{"a name resolving to loopback", "url", map[string]any{"url": "https://rebind.example.com", "vkey": vk}},
			{"a name resolving to a private address", "url", map[string]any{"url": "https://corp.example.com", "vkey": vk}},
			{"a name resolving to metadata", "url", map[string]any{"url": "https://meta.example.com", "vkey": vk}},
			{"an unknown field", "body", map[string]any{"url": "https://witness.example.com", "vkey": vk, "name": "x"}},
			{"not an object", "body", []string{"x"}},
		} {
			raw := do("POST", ws, adm, tt.body, 400)
			if !strings.Contains(string(raw), tt.field) {
				t.Errorf("%s: the 400 does not name %s: %s", tt.name, tt.field, raw)
			}
		}
		if got := list(member); len(got) != 0 {
			t.Fatalf("a refused witness was stored: %+v", got)
		}
		if after := orgSettingEvents(t, admin, org); after != before {
			t.Fatalf("refusals recorded %d events", after-before)
		}
	})

	t.Run("authorization", func(t *testing.T) {
		body := map[string]any{"url": "https://witness.example.com", "vkey": vk}
		do("POST", ws, "", body, 401)
		do("POST", ws, "not-a-key", body, 401)
		do("POST", ws, member, body, 403)
		do("POST", ws, outsider, body, 403)
		do("GET", ws, outsider, nil, 403)
		do("GET", "/api/v1/orgs/"+uuid.NewString()+"/witnesses", member, nil, 403)
		do("GET", "/api/v1/orgs/"+uuid.NewString()+"/witnesses", bootKey, nil, 404)
		do("GET", "/api/v1/orgs/not-a-uuid/witnesses", bootKey, nil, 400)
	})

	// An admin, the owner and the platform admin add witnesses.
	var ids []string
	for i, key := range []string{adm, owner, bootKey} {
		v := witnessVKey(t, fmt.Sprintf("witness.example.com/k%d", i))
		var got struct {
			Data witnessReply `json:"data"`
		}
		raw := do("POST", ws, key, map[string]any{"url": " https://witness.example.com/w/ ", "vkey": " " + v + "\n"}, 201)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		w := got.Data
		if w.VKey != v || w.Name != fmt.Sprintf("witness.example.com/k%d", i) || w.URL != "https://witness.example.com/w" || w.Source != WitnessSourceOrganization ||
			w.Status != WitnessPending || w.LastCosignedSize != nil || w.CreatedAt == nil || w.OrgID == nil || w.OrgID.String() != org ||
			w.Logs["audit_logs"].Status != WitnessPending || w.Logs["tool_executions"].Status != WitnessPending {
			t.Fatalf("created: %s", raw)
		}
		ids = append(ids, w.ID)
	}

	t.Run("a key once", func(t *testing.T) {
		v := witnessVKey(t, "witness.example.com/k0")
		raw := do("POST", ws, adm, map[string]any{"url": "https://witness.example.com/elsewhere", "vkey": v}, 409)
		if !strings.Contains(string(raw), ids[0]) {
			t.Fatalf("the 409 does not name the witness: %s", raw)
		}
		// Another organization may add the same witness.
		do("POST", "/api/v1/orgs/"+otherOrg+"/witnesses", outsider, map[string]any{"url": "https://witness.example.com", "vkey": v}, 201)
	})

	// The checkpointer's view, as the tlog role writes it in its bucket.
	tjs, _ := jetstream.New(a.Connect(t, natsx.RoleTLog))
	ctx := context.Background()
	tkv, err := tjs.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	opVKey := witnessVKey(t, "operator.example/witness")
	opW, err := witness.New("https://operator.example", opVKey)
	if err != nil {
		t.Fatal(err)
	}
	opID := checkpointer.OperatorID(opW)
	put := func(key string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if _, err := tkv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	put(checkpointer.OperatorWitnessesKey, []checkpointer.OperatorWitness{{ID: opID, URL: opW.URL, VKey: opVKey, Name: opW.Key.Name}})
	orgID := uuid.MustParse(org)
	at := time.Now().UTC().Truncate(time.Millisecond)
	vk0 := witnessVKey(t, "witness.example.com/k0")
	put(checkpointer.WitnessStatusKey(orgID, "audit_logs", ids[0]), checkpointer.WitnessStatus{Witness: vk0, ID: ids[0], Org: orgID, Kind: "audit_logs", CosignedSize: 41, At: at})
	put(checkpointer.WitnessStatusKey(orgID, "tool_executions", ids[0]), checkpointer.WitnessStatus{Witness: vk0, ID: ids[0], Org: orgID, Kind: "tool_executions",
		CosignedSize: -1, Error: "the witness does not know this log or its key (403)", At: at})
	put(checkpointer.WitnessStatusKey(orgID, "audit_logs", opID), checkpointer.WitnessStatus{Witness: opVKey, ID: opID, Org: orgID, Kind: "audit_logs",
		CosignedSize: 7, Error: "witness unavailable: HTTP 503", At: at})
	// A status under a witness's id for another key is not its status.
	put(checkpointer.WitnessStatusKey(orgID, "audit_logs", ids[1]), checkpointer.WitnessStatus{Witness: opVKey, ID: ids[1], Org: orgID, Kind: "audit_logs", CosignedSize: 99, At: at})

	t.Run("listed with their statuses", func(t *testing.T) {
		got := list(member)
		if len(got) != 4 || got[0].ID != opID || got[0].Source != WitnessSourceOperator || got[0].CreatedAt != nil || got[0].OrgID != nil {
			t.Fatalf("the operator's witness first: %+v", got)
		}
		if op := got[0]; op.Status != WitnessFailing || op.LastError != "witness unavailable: HTTP 503" || op.LastCosignedSize == nil || *op.LastCosignedSize != 7 ||
			op.VKey != opVKey || op.Name != "operator.example/witness" {
			t.Fatalf("the operator's witness: %+v", op)
		}
		w := got[1]
		if w.ID != ids[0] || w.Status != WitnessCosigning || w.LastCosignedSize == nil || *w.LastCosignedSize != 41 || w.LastError != "" {
			t.Fatalf("a cosigning witness: %+v", w)
		}
		if l := w.Logs["audit_logs"]; l.Status != WitnessCosigning || l.At == nil || !l.At.Equal(at) {
			t.Fatalf("its audit_logs: %+v", l)
		}
		if l := w.Logs["tool_executions"]; l.Status != WitnessFailing || l.LastCosignedSize != nil || !strings.Contains(l.LastError, "403") {
			t.Fatalf("its tool_executions: %+v", l)
		}
		if w := got[2]; w.ID != ids[1] || w.Status != WitnessPending || w.LastCosignedSize != nil {
			t.Fatalf("a status of another key was taken: %+v", w)
		}
		var one struct {
			Data witnessReply `json:"data"`
		}
		_ = json.Unmarshal(do("GET", ws+"/"+ids[0], member, nil, 200), &one)
		if one.Data.ID != ids[0] || one.Data.Status != WitnessCosigning {
			t.Fatalf("get one: %+v", one.Data)
		}
		_ = json.Unmarshal(do("GET", ws+"/"+opID, member, nil, 200), &one)
		if one.Data.Source != WitnessSourceOperator {
			t.Fatalf("get the operator's: %+v", one.Data)
		}
		do("GET", ws+"/"+uuid.NewString(), member, nil, 404)
		do("GET", ws+"/operator-0123456789abcdef", member, nil, 404)
		do("GET", ws+"/nope", member, nil, 400)
		do("GET", ws+"/"+ids[0], outsider, nil, 403)
		// Another organization sees its own witness, not these.
		var other struct {
			Data []witnessReply `json:"data"`
		}
		_ = json.Unmarshal(do("GET", "/api/v1/orgs/"+otherOrg+"/witnesses", outsider, nil, 200), &other)
		if len(other.Data) != 2 || other.Data[1].Status != WitnessPending {
			t.Fatalf("the other organization's witnesses: %+v", other.Data)
		}
	})

	t.Run("the operator's are read-only", func(t *testing.T) {
		raw := do("POST", ws, adm, map[string]any{"url": "https://witness.example.com", "vkey": opVKey}, 409)
		if !strings.Contains(string(raw), "operator") {
			t.Fatalf("adding the operator's key: %s", raw)
		}
		for _, key := range []string{adm, owner, bootKey} {
			if raw := do("DELETE", ws+"/"+opID, key, nil, 403); !strings.Contains(string(raw), "operator") {
				t.Fatalf("deleting the operator's: %s", raw)
			}
		}
		if got := list(member); len(got) != 4 || got[0].ID != opID {
			t.Fatalf("after the attempts: %+v", got)
		}
	})

	t.Run("at most eight", func(t *testing.T) {
		for i := len(ids); i < cpstate.MaxWitnesses; i++ {
			do("POST", ws, adm, map[string]any{"url": "https://witness.example.com", "vkey": witnessVKey(t, fmt.Sprintf("witness.example.com/more%d", i))}, 201)
		}
		raw := do("POST", ws, bootKey, map[string]any{"url": "https://witness.example.com", "vkey": witnessVKey(t, "witness.example.com/ninth")}, 409)
		if !strings.Contains(string(raw), "8 witnesses") {
			t.Fatalf("the ninth: %s", raw)
		}
		if got := list(member); len(got) != 1+cpstate.MaxWitnesses {
			t.Fatalf("listed %d", len(got))
		}
	})

	t.Run("removed", func(t *testing.T) {
		do("DELETE", ws+"/"+ids[0], member, nil, 403)
		do("DELETE", ws+"/"+ids[0], outsider, nil, 403)
		do("DELETE", ws+"/nope", adm, nil, 400)
		do("DELETE", ws+"/"+uuid.NewString(), adm, nil, 404)
		do("DELETE", ws+"/"+ids[0], owner, nil, 204)
		do("DELETE", ws+"/"+ids[0], owner, nil, 404)
		do("GET", ws+"/"+ids[0], member, nil, 404)
		for _, w := range list(member) {
			if w.ID == ids[0] {
				t.Fatal("a removed witness is listed")
			}
		}
		// Its key may be added again, under a new id.
		var got struct {
			Data witnessReply `json:"data"`
		}
		_ = json.Unmarshal(do("POST", ws, adm, map[string]any{"url": "https://witness.example.com", "vkey": vk0}, 201), &got)
		if got.Data.ID == ids[0] || got.Data.Status != WitnessPending {
			t.Fatalf("added again: %+v", got.Data)
		}
	})

	t.Run("audited", func(t *testing.T) {
		var evs []schemas.AuditEvent
		testenv.Eventually(t, 10*time.Second, "the events of the removed witness", func() bool {
			evs = auditOf(t, admin, ids[0])
			return len(evs) == 2
		})
		for i, want := range []schemas.AuditAction{schemas.AuditActionCreated, schemas.AuditActionDeleted} {
			ev := evs[i]
			if ev.Action != want || ev.ResourceType == nil || *ev.ResourceType != schemas.ResourceTypeSetting || ev.OrganizationID.String() != org ||
				ev.ResourceDisplay == nil || *ev.ResourceDisplay != "witness witness.example.com/k0" {
				t.Fatalf("event %d: %+v", i, ev)
			}
			var d struct{ Before, After *cpstate.Witness }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			w := d.After
			if want == schemas.AuditActionDeleted {
				w = d.Before
			}
			if w == nil || w.ID.String() != ids[0] || w.VKey != vk0 || w.URL != "https://witness.example.com/w" {
				t.Fatalf("event %d data: %s", i, ev.Data)
			}
		}
		if evs[0].PrincipalID == evs[1].PrincipalID || evs[1].UserID == nil || *evs[1].UserID != "olga" {
			t.Fatalf("the principals: %+v %+v", evs[0], evs[1])
		}
	})

	for _, op := range []string{"listWitnesses", "createWitness", "getWitness", "deleteWitness"} {
		if !api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// The egress guard decides what a witness's URL may be, as for a
// destination: public only (strict), plus loopback (dev), or anything
// (--allow-private-egress); a name that does not resolve now is a warning.
func TestWitnessEgressModes(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	n.run()
	urls := []string{"https://witness.example.com", "http://127.0.0.1:9", "http://localhost.example.com:9", "https://10.1.2.3",
		"http://169.254.169.254", "https://nowhere.example.com"}
	names := witnessNames{"witness.example.com": "93.184.216.34", "localhost.example.com": "127.0.0.1"}
	for _, tt := range []struct {
		mode egress.Mode
		want []int
	}{
		{egress.ModeStrict, []int{201, 400, 400, 400, 400, 201}},
		{egress.ModeDev, []int{201, 201, 201, 400, 400, 201}},
		{egress.ModeAllowPrivate, []int{201, 201, 201, 201, 201, 201}},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			g, err := egress.New(egress.Config{Mode: tt.mode, Resolver: names}, nil)
			if err != nil {
				t.Fatal(err)
			}
			n.svc.UseEgress(g)
			org := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "o"}).field("id")
			for i, u := range urls {
				r := n.call("POST", "/api/v1/orgs/"+org+"/witnesses", bootKey, map[string]any{"url": u, "vkey": witnessVKey(t, fmt.Sprintf("w.example/%d", i))})
				if r.status != tt.want[i] {
					t.Errorf("%s: %d %s (want %d)", u, r.status, r.Msg, tt.want[i])
				}
				if r.status == 400 && !strings.Contains(r.Msg, "url") {
					t.Errorf("%s: the 400 does not name url: %s", u, r.Msg)
				}
				if u == "https://nowhere.example.com" && r.status == 201 && tt.mode != egress.ModeAllowPrivate && !strings.Contains(string(r.Data), "does not resolve") {
					t.Errorf("an unresolved name without a warning: %s", r.Data)
				}
			}
		})
	}
}
