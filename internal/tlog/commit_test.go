package tlog_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/tlog"
)

var v2Salt = bytes.Repeat([]byte{7}, tlog.SaltBytes)

// v2Item is an audit item of version 2 (its salt served).
func v2Item(t *testing.T, mutate func(m map[string]any)) []byte {
	t.Helper()
	m := map[string]any{
		"id": "e1", "event_id": "ev-1", "timestamp": "2026-01-01T00:00:00.000Z", "client_ip": "10.0.0.7",
		"action": "DELETE", "source": "API", "display_name": "Alice Example", "customer_id": nil,
		"organization_id": "org", "project_id": nil, "principal_id": "alice", "user_id": "alice",
		"principal_type": "ACCOUNT", "resource_type": "USER", "resource_id": "bob", "resource_display": "Bob",
		"data":         map[string]any{"role": "admin", "reason": "asked by alice", "n": 3},
		"created_time": "2026-01-01T00:00:01.000Z", "leaf_index": 4,
		"salt": base64.StdEncoding.EncodeToString(v2Salt),
	}
	if mutate != nil {
		mutate(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The leaf of version 2, written out by hand from the contract's text:
// SHA-256 of the key, the field keys from the salt, the data members in
// JCS order as [name, value].
func TestLeafV2IsTheContracts(t *testing.T) {
	key := func(f string) []byte {
		s := sha256.Sum256(append(append(append([]byte("auditrail field key v2\x00"), v2Salt...), 0), f...))
		return s[:]
	}
	c := func(f, v string) string {
		s := sha256.Sum256(append(key(f), v...))
		return base64.StdEncoding.EncodeToString(s[:])
	}
	// JCS orders data's members n, reason, role.
	want := `{"action":"DELETE","commitments":{` +
		`"client_ip":"` + c("client_ip", `"10.0.0.7"`) + `",` +
		`"data":["` + c("data/0", `["n",3]`) + `","` + c("data/1", `["reason","asked by alice"]`) + `","` + c("data/2", `["role","admin"]`) + `"],` +
		`"display_name":"` + c("display_name", `"Alice Example"`) + `",` +
		`"principal_id":"` + c("principal_id", `"alice"`) + `",` +
		`"resource_display":"` + c("resource_display", `"Bob"`) + `",` +
		`"resource_id":"` + c("resource_id", `"bob"`) + `",` +
		`"user_id":"` + c("user_id", `"alice"`) + `"},` +
		`"created_time":"2026-01-01T00:00:01.000Z","customer_id":null,"event_id":"ev-1","id":"e1","leaf_version":2,` +
		`"organization_id":"org","principal_type":"ACCOUNT","project_id":null,"resource_type":"USER","source":"API",` +
		`"timestamp":"2026-01-01T00:00:00.000Z"}`
	e, err := tlog.ParseEntry(nil, v2Item(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Canonical) != want {
		t.Fatalf("canonical\n got %s\nwant %s", e.Canonical, want)
	}
	if e.Leaf != tlog.LeafHash([]byte(want)) || e.Version != 2 || e.LeafIndex != 4 || e.EventID() != "ev-1" {
		t.Fatalf("entry %+v", e)
	}
}

// Every change to a version 2 entry changes its leaf: a field, committed
// or not, a data member, the salt, the salt's removal.
func TestLeafV2CoversEveryField(t *testing.T) {
	base, err := tlog.ParseEntry(nil, v2Item(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(m map[string]any){
		"action":          func(m map[string]any) { m["action"] = "CREATE" },
		"user_id":         func(m map[string]any) { m["user_id"] = "mallory" },
		"client_ip":       func(m map[string]any) { m["client_ip"] = nil },
		"a data member":   func(m map[string]any) { m["data"].(map[string]any)["role"] = "owner" },
		"a data name":     func(m map[string]any) { d := m["data"].(map[string]any); d["rank"] = d["role"]; delete(d, "role") },
		"an added member": func(m map[string]any) { m["data"].(map[string]any)["x"] = 1 },
		"the salt":        func(m map[string]any) { m["salt"] = base64.StdEncoding.EncodeToString(make([]byte, tlog.SaltBytes)) },
		"no salt":         func(m map[string]any) { delete(m, "salt") },
	} {
		e, err := tlog.ParseEntry(nil, v2Item(t, mutate))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e.Leaf == base.Leaf {
			t.Errorf("%s: the leaf did not change", name)
		}
	}
	for name, salt := range map[string]any{"short": "AAAA", "not base64": "!!", "a number": 3} {
		if _, err := tlog.ParseEntry(nil, v2Item(t, func(m map[string]any) { m["salt"] = salt })); err == nil {
			t.Errorf("salt %s: accepted", name)
		}
	}
}

// erase rewrites the item as an erasure does: the given fields and data
// members replaced, the salt forgotten, the fields opened.
func erase(t *testing.T, item []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(item, &m); err != nil {
		t.Fatal(err)
	}
	orig, _ := json.Marshal(m)
	salt, _ := base64.StdEncoding.DecodeString(m["salt"].(string))
	delete(m, "salt")
	change(m)
	now, _ := json.Marshal(m)
	fields, err := tlog.OpenErased(orig, now, salt)
	if err != nil {
		t.Fatal(err)
	}
	e, err := tlog.ParseEntry(nil, item)
	if err != nil {
		t.Fatal(err)
	}
	m["erasure"] = map[string]any{"id": "x", "leaf_hash": base64.StdEncoding.EncodeToString(e.Leaf[:]), "fields": fields}
	out, _ := json.Marshal(m)
	if bytes.Contains(out, []byte(m["erasure"].(map[string]any)["leaf_hash"].(string))) && bytes.Contains(out, salt) {
		t.Fatal("the salt is served")
	}
	return out
}

// An erased entry keeps its leaf; its erased fields are not checked, and
// every other field is: altering one by hand changes the leaf.
func TestErasedV2KeepsItsLeaf(t *testing.T) {
	item := v2Item(t, nil)
	orig, err := tlog.ParseEntry(nil, item)
	if err != nil {
		t.Fatal(err)
	}
	erased := erase(t, item, func(m map[string]any) {
		m["user_id"], m["principal_id"], m["display_name"], m["client_ip"] = "erased-1", "erased-1", "erased-1", "erased-1"
		d := m["data"].(map[string]any)
		d["reason"] = "asked by erased-1"
	})
	if strings.Contains(string(erased), "alice") || strings.Contains(string(erased), "Alice") || strings.Contains(string(erased), "10.0.0.7") {
		t.Fatalf("an erased value is served: %s", erased)
	}
	e, err := tlog.ParseEntry(nil, erased)
	if err != nil {
		t.Fatal(err)
	}
	if e.Leaf != orig.Leaf || e.Version != 2 {
		t.Fatalf("the erased entry's leaf changed: %+v", e)
	}
	if want := []string{"client_ip", "data", "display_name", "principal_id", "user_id"}; !slices.Equal(e.Erased, want) {
		t.Fatalf("erased fields %q, want %q", e.Erased, want)
	}
	edit := func(f func(m map[string]any)) tlog.Entry {
		var m map[string]any
		_ = json.Unmarshal(erased, &m)
		f(m)
		b, _ := json.Marshal(m)
		e, err := tlog.ParseEntry(nil, b)
		if err != nil {
			return tlog.Entry{}
		}
		return e
	}
	// The erased values are not checked: another pseudonym keeps the leaf.
	if e := edit(func(m map[string]any) { m["user_id"] = "erased-2" }); e.Leaf != orig.Leaf {
		t.Fatal("an erased field is checked")
	}
	for name, f := range map[string]func(m map[string]any){
		"action":                 func(m map[string]any) { m["action"] = "CREATE" },
		"resource_id (kept)":     func(m map[string]any) { m["resource_id"] = "carol" },
		"resource_display":       func(m map[string]any) { m["resource_display"] = "Carol" },
		"a kept data member":     func(m map[string]any) { m["data"].(map[string]any)["role"] = "owner" },
		"a kept data member out": func(m map[string]any) { delete(m["data"].(map[string]any), "n") },
		"the timestamp":          func(m map[string]any) { m["timestamp"] = "2026-01-02T00:00:00.000Z" },
		"a commitment": func(m map[string]any) {
			m["erasure"].(map[string]any)["fields"].(map[string]any)["user_id"] = map[string]any{"commitment": base64.StdEncoding.EncodeToString(make([]byte, 32))}
		},
	} {
		if e := edit(f); e.Leaf == orig.Leaf {
			t.Errorf("%s altered by hand: the leaf still matches", name)
		}
	}
}

// A data member renamed by an erasure (its name was the person's) is
// erased; its original name is nowhere in the served entry.
func TestErasedV2RenamedDataMember(t *testing.T) {
	item := v2Item(t, func(m map[string]any) { m["data"] = map[string]any{"alice": "admin", "team": "ops"} })
	orig, _ := tlog.ParseEntry(nil, item)
	erased := erase(t, item, func(m map[string]any) {
		m["data"] = map[string]any{"erased-1": "admin", "team": "ops"}
	})
	if strings.Contains(string(erased), `"alice":`) {
		t.Fatalf("the erased name is served: %s", erased)
	}
	e, err := tlog.ParseEntry(nil, erased)
	if err != nil || e.Leaf != orig.Leaf || !slices.Equal(e.Erased, []string{"data"}) {
		t.Fatalf("%v %+v", err, e)
	}
}

func FuzzErasedFields(f *testing.F) {
	f.Add([]byte(`{"user_id":{"key":"AAAA"},"data":[{"member":"a","key":"x"},{"commitment":"y"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		line := append([]byte(`{"id":"1","user_id":"u","data":{"a":1},"leaf_index":1,"erasure":{"id":"x","leaf_hash":"","fields":`), b...)
		line = append(line, "}}"...)
		_, _ = tlog.ParseEntry(nil, line) // no panic
	})
}

// An entry erased twice keeps its leaf: the second erasure turns the
// keys of the fields it replaces into commitments.
func TestErasedV2Twice(t *testing.T) {
	item := v2Item(t, nil)
	orig, _ := tlog.ParseEntry(nil, item)
	once := erase(t, item, func(m map[string]any) { m["user_id"] = "erased-1" })
	var m map[string]any
	_ = json.Unmarshal(once, &m)
	er := m["erasure"].(map[string]any)
	fb, _ := json.Marshal(er["fields"])
	var prev tlog.ErasedFields
	if err := json.Unmarshal(fb, &prev); err != nil {
		t.Fatal(err)
	}
	cur, _ := json.Marshal(m)
	m["resource_id"], m["resource_display"] = "erased-2", "erased-2"
	m["data"].(map[string]any)["role"] = "erased-2"
	next, _ := json.Marshal(m)
	fields, err := tlog.Reopen(prev, cur, next)
	if err != nil {
		t.Fatal(err)
	}
	er["fields"] = fields
	twice, _ := json.Marshal(m)
	e, err := tlog.ParseEntry(nil, twice)
	if err != nil {
		t.Fatal(err)
	}
	if e.Leaf != orig.Leaf || !slices.Equal(e.Erased, []string{"data", "resource_display", "resource_id", "user_id"}) {
		t.Fatalf("erased twice: %+v", e)
	}
	m["action"] = "CREATE"
	altered, _ := json.Marshal(m)
	if e, _ := tlog.ParseEntry(nil, altered); e.Leaf == orig.Leaf {
		t.Fatal("an altered action still matches")
	}
}
