//go:build e2e

package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// TestDashboardVerifies: the page verifies, in the browser, each entry it
// opens against the log's latest signed checkpoint, and shows the
// checkpoint. On a dev over SQLite checkpointing every 300 ms: an audit
// entry and a tool execution show "Verified against checkpoint N" and each
// view its checkpoint (size, root, key id as the API gives them); then the
// SQLite file is edited behind the log's back: an altered entry shows "the
// leaf differs", a checkpoint whose root was changed "signature invalid",
// one signed by a key absent from audit_keys "unknown key". The JS code
// (JCS, leaf, inclusion proof, signed note) is checked first against
// vectors made by internal/tlog.
func TestDashboardVerifies(t *testing.T) {
	t.Parallel()
	d := openDashboard(t, "--checkpoint-interval", "300ms")
	d.do(t, "page", chromedp.Navigate(d.url("")), chromedp.WaitVisible(chromedp.CSS("#credential")))
	t.Run("js_against_go_vectors", func(t *testing.T) { testJSVectors(t, d) })

	seedTenant(t, d, false)
	audit := d.waitCovered(t, "audit_logs")
	execs := d.waitCovered(t, "tool_executions")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.p.data, "audit.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec := func(q string, args ...any) {
		t.Helper()
		res, err := db.Exec(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows changed, want 1", q, n)
		}
	}

	type view struct {
		name, kind, query string
		c                 covered
	}
	views := []view{{"audit", "audit_logs", "?view=audit", audit}, {"executions", "tool_executions", "?view=executions", execs}}
	// An untampered entry of each log: the oldest listed (leaf 0 or near).
	for _, v := range views {
		t.Run("verified_"+v.name, func(t *testing.T) {
			d := d.withTab(t)
			it := v.c.items[len(v.c.items)-1]
			d.signIn(t, d.alice, v.query+"&open="+it.id)
			d.do(t, "verified", until(checked))
			text := value(t, d, "badge", chromedp.Text(chromedp.CSS("#verify")))
			if state := value(t, d, "state", chromedp.Evaluate[string](`document.getElementById("verify").dataset.state`)); state != "verified" {
				t.Fatalf("entry at leaf %d: %s: %q", it.leaf, state, text)
			}
			size := value(t, d, "size", chromedp.Evaluate[int64](`Number(document.getElementById("verify").dataset.size)`))
			if !strings.Contains(text, fmt.Sprintf("Verified against checkpoint %d", size)) || size < it.leaf+1 || size < v.c.cp.Size {
				t.Errorf("entry at leaf %d: %q (data-size %d), want verified against a checkpoint of at least %d", it.leaf, text, size, max(it.leaf+1, v.c.cp.Size))
			}
			d.do(t, "checkpoint", until(`document.querySelector("#checkpoint[data-state=verified]")`))
			panel := value(t, d, "panel", chromedp.Text(chromedp.CSS("#checkpoint")))
			for _, want := range []string{fmt.Sprintf("%d entries", size), v.c.cp.RootHash, v.c.cp.KeyID} {
				if !strings.Contains(panel, want) {
					t.Errorf("checkpoint panel %q lacks %q", panel, want)
				}
			}
		})
	}

	// An erased entry, as an erasure leaves one of version 2: its name
	// rewritten, its salt forgotten, its fields opened beside its original
	// leaf: "Erased", the erased field named and every other verified; then
	// a field the erasure kept, altered by hand: the leaf differs.
	t.Run("erased_audit", func(t *testing.T) {
		it := audit.items[1]
		code, b := d.rawGet(t, "/api/v1/orgs/"+d.org+"/audit_logs/proof?event_id="+it.id, d.boot)
		var proof struct {
			Data struct {
				LeafHash string `json:"leaf_hash"`
			} `json:"data"`
		}
		if code != 200 || json.Unmarshal(b, &proof) != nil {
			t.Fatalf("proof: %d %s", code, b)
		}
		leaf, err := base64.StdEncoding.DecodeString(proof.Data.LeafHash)
		if err != nil {
			t.Fatal(err)
		}
		code, b = d.rawGet(t, "/api/v1/orgs/"+d.org+"/audit_logs?limit=100", d.boot)
		var list struct {
			Data struct {
				Items []map[string]any `json:"items"`
			} `json:"data"`
		}
		if code != 200 || json.Unmarshal(b, &list) != nil {
			t.Fatalf("list: %d %.300s", code, b)
		}
		var before map[string]any
		for _, m := range list.Data.Items {
			if m["event_id"] == it.id {
				before = m
			}
		}
		salt, err := base64.StdEncoding.DecodeString(fmt.Sprint(before["salt"]))
		if before == nil || err != nil || len(salt) != tlog.SaltBytes {
			t.Fatalf("the entry's salt: %v %v", before["salt"], err)
		}
		orig, _ := json.Marshal(before)
		const pseudonym = "erased-0011223344556677"
		before["display_name"] = pseudonym
		now, _ := json.Marshal(before)
		fields, err := tlog.OpenErased(orig, now, salt)
		if err != nil {
			t.Fatal(err)
		}
		fb, _ := json.Marshal(fields)
		erasure := uuid.NewString()
		exec(`UPDATE audit_logs SET display_name = ?, salt = NULL WHERE organization_id = ? AND event_id = ?`, pseudonym, d.org, it.id)
		exec(`INSERT INTO entry_erasures (organization_id, kind, event_id, erasure_id, leaf_hash, fields) VALUES (?, 0, ?, ?, ?, ?)`, d.org, it.id, erasure, leaf, string(fb))
		open := func(t *testing.T) *dash {
			d := d.withTab(t)
			d.signIn(t, d.alice, "?view=audit&open="+it.id)
			d.do(t, "checked", until(checked))
			return d
		}
		dt := open(t)
		if state := value(t, dt, "state", chromedp.Evaluate[string](`document.getElementById("verify").dataset.state`)); state != "erased" {
			t.Fatalf("erased entry: state %q: %q", state, value(t, dt, "badge", chromedp.Text(chromedp.CSS("#verify"))))
		}
		if text := value(t, dt, "badge", chromedp.Text(chromedp.CSS("#verify"))); !strings.Contains(text, "Erased by erasure "+erasure+": display_name replaced by the pseudonym (not checked); every other field verified") {
			t.Errorf("erased entry: %q", text)
		}
		exec(`UPDATE audit_logs SET ts_ms = ts_ms + 1000 WHERE organization_id = ? AND event_id = ?`, d.org, it.id)
		dt = open(t)
		if check := value(t, dt, "check", chromedp.Evaluate[string](`document.getElementById("verify").dataset.check`)); check != "leaf" {
			t.Errorf("erased entry altered: check %q failed, want leaf", check)
		}
		if text := value(t, dt, "badge", chromedp.Text(chromedp.CSS("#verify"))); !strings.Contains(text, "a field that the erasure did not replace was changed") {
			t.Errorf("erased entry altered: %q", text)
		}
	})

	// An altered entry: its leaf is not the one the log holds.
	auditVictim, execVictim := audit.items[len(audit.items)/2], execs.items[len(execs.items)/2]
	exec(`UPDATE audit_logs SET display_name = 'Mallory' WHERE organization_id = ? AND event_id = ?`, d.org, auditVictim.id)
	exec(`UPDATE tool_executions SET user_id = 'mallory' WHERE organization_id = ? AND event_id = ?`, d.org, execVictim.id)
	for _, tc := range []struct {
		v  view
		id string
	}{{views[0], auditVictim.id}, {views[1], execVictim.id}} {
		t.Run("altered_"+tc.v.name, func(t *testing.T) {
			d := d.withTab(t)
			d.signIn(t, d.alice, tc.v.query+"&open="+tc.id)
			d.do(t, "checked", until(checked))
			if check := value(t, d, "check", chromedp.Evaluate[string](`document.getElementById("verify").dataset.check`)); check != "leaf" {
				t.Errorf("altered entry: check %q failed, want leaf", check)
			}
			if text := value(t, d, "badge", chromedp.Text(chromedp.CSS("#verify"))); !strings.Contains(text, "the leaf differs") {
				t.Errorf("altered entry: %q", text)
			}
		})
	}

	// The latest audit checkpoint, replaced in the file.
	var logID, size int64
	var note []byte
	if err := db.QueryRow(`SELECT c.log_id, c.size, c.note FROM log_heads l JOIN log_checkpoints c ON c.log_id = l.log_id
		WHERE l.organization_id = ? AND l.kind = 0 ORDER BY c.size DESC LIMIT 1`, d.org).Scan(&logID, &size, &note); err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(string(note), "\n\n")
	lines := strings.Split(body, "\n")
	other := base64.StdEncoding.EncodeToString(make([]byte, 32))
	alien, _, err := tlog.GenerateKey("auditrail", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cpTime, err := time.Parse(tlog.TimeFormat, strings.TrimPrefix(lines[3], tlog.TimestampExtension))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tlog.Sign(tlog.Checkpoint{Origin: lines[0], Size: size, Root: tlog.Hash{1, 2, 3}, Time: cpTime}, alien)
	if err != nil {
		t.Fatal(err)
	}
	good := audit.items[len(audit.items)-1]
	for _, tc := range []struct {
		name  string
		note  string
		check string
		says  string
	}{
		{"root_changed_signature_kept", strings.Replace(string(note), "\n"+lines[2]+"\n", "\n"+other+"\n", 1), "signature", "signature is invalid"},
		{"signed_by_unknown_key", string(forged), "key", "unknown key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.note == string(note) {
				t.Fatal("the note was not changed")
			}
			exec(`UPDATE log_checkpoints SET note = ? WHERE log_id = ? AND size = ?`, []byte(tc.note), logID, size)
			d := d.withTab(t)
			d.signIn(t, d.alice, "?view=audit&open="+good.id)
			d.do(t, "checked", until(checked+` && document.getElementById("checkpoint").dataset.state !== "checking"`))
			got := value(t, d, "checks", chromedp.Evaluate[[]string](`[document.getElementById("verify").dataset.check, document.getElementById("checkpoint").dataset.check]`))
			if got[0] != tc.check || got[1] != tc.check {
				t.Errorf("entry and panel failed %q, want %q", got, tc.check)
			}
			for _, sel := range []string{"#verify", "#checkpoint"} {
				if text := value(t, d, sel, chromedp.Text(chromedp.CSS(sel))); !strings.Contains(text, tc.says) {
					t.Errorf("%s: %q lacks %q", sel, text, tc.says)
				}
			}
		})
	}
}

// checked: the opened entry's verification is done (whatever it says).
const checked = `document.getElementById("verify") && document.getElementById("verify").dataset.state !== "checking"`

// covered is a log whose latest checkpoint covers every listed entry.
type covered struct {
	cp    coveredCheckpoint
	items []coveredItem // newest first
}

type coveredCheckpoint struct {
	Size            int64
	RootHash, KeyID string
}

type coveredItem struct {
	id   string
	leaf int64
}

// waitCovered waits until every entry of the org's list route of kind has
// a leaf_index and the latest checkpoint covers them all.
func (d *dash) waitCovered(t *testing.T, kind string) covered {
	t.Helper()
	var c covered
	var last string
	testenv.Eventually(t, 30*time.Second, func() string { return kind + ": a checkpoint covering every entry: " + last }, func() bool {
		c = covered{}
		code, b := d.rawGet(t, "/api/v1/orgs/"+d.org+"/"+kind+"?limit=100", d.boot)
		var list struct {
			Data struct {
				Items []struct {
					EventID   string `json:"event_id"`
					LeafIndex *int64 `json:"leaf_index"`
				} `json:"items"`
				HasMore bool `json:"has_more"`
			} `json:"data"`
		}
		if code != 200 || json.Unmarshal(b, &list) != nil || list.Data.HasMore {
			t.Fatalf("GET %s: %d %.300s", kind, code, b)
		}
		ok := len(list.Data.Items) > 0
		for _, it := range list.Data.Items {
			if it.LeafIndex == nil {
				ok = false
				break
			}
			c.items = append(c.items, coveredItem{it.EventID, *it.LeafIndex})
		}
		var cp struct {
			Data struct {
				Size     int64  `json:"size"`
				RootHash string `json:"root_hash"`
				KeyID    string `json:"key_id"`
			} `json:"data"`
		}
		code, b = d.rawGet(t, "/api/v1/orgs/"+d.org+"/"+kind+"/checkpoint", d.boot)
		if ok && code == 200 && json.Unmarshal(b, &cp) == nil && cp.Data.Size >= int64(len(c.items)) {
			c.cp.Size, c.cp.RootHash, c.cp.KeyID = cp.Data.Size, cp.Data.RootHash, cp.Data.KeyID
			return true
		}
		last = fmt.Sprintf("%d entries (checkpoint: %d %.300s)", len(list.Data.Items), code, b)
		return false
	})
	return c
}

// jsVectors are made by internal/tlog; the page's tlog.js must agree.
type jsVectors struct {
	Entries []jsEntry       `json:"entries"`
	Proofs  []jsProof       `json:"proofs"`
	Notes   []jsNote        `json:"notes"`
	KeysRaw json.RawMessage `json:"keys"`
}

type jsEntry struct {
	JSON      string `json:"json"`
	Canonical string `json:"canonical"` // "" when Go finds no canonical form
	Leaf      string `json:"leaf"`
}

type jsProof struct {
	Size   int64    `json:"size"`
	Index  int64    `json:"index"`
	Root   string   `json:"root"`
	Leaf   string   `json:"leaf"`
	Hashes []string `json:"hashes"`
	Valid  bool     `json:"valid"`
}

type jsNote struct {
	Name   string `json:"name"`
	Note   string `json:"note"`
	Origin string `json:"origin"`
	Check  string `json:"check"` // "" verifies; else the check that must fail
	Size   int64  `json:"size"`
	Root   string `json:"root"`
}

func makeJSVectors(t *testing.T) jsVectors {
	t.Helper()
	var v jsVectors
	for _, s := range []string{
		`{"event_id":"e1","display_name":"Zoë \u00e9t\u00E9 😀 \u2028 \u003cb\u003e \u0026 \/ \" \\ \b\f\n\r\t \u0000\u001f\u007f","leaf_index":3,"position":"p"}`,
		`{"data":{"n":[1.5e3,-0,0,1e21,1e-7,0.1,-1.25,123456789012345678,5e-324,1.7976931348623157e308,100,1E2,2.50]},"leaf_index":null,"id":"x"}`,
		`{"data":{"z":1,"é":2,"€":3,"😀":4,"\uffff":5,"a":{"b":[true,false,null,{}],"":[]},"A":6,"\u0001":7},"action":"UPDATED"}`,
		`{"tool":{"toolkit":"T","name":"N","version":"1"},"hooks":[{"point":"pre","latency_ms":0.8}],"duration_ms":33,"success":true,"error":null,"extra_field":1}`,
		`{"display_name":"\ud83d\ude00 pair","data":{"k":"\ud800 alone"}}`,
		`{"data":{"\udc00":1}}`,
		`{"data":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`, // 64 levels with the entry: the most there may be
		`{"data":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	} {
		e := jsEntry{JSON: s}
		if c, err := tlog.Canonical([]byte(s)); err == nil {
			leaf := tlog.LeafHash(c)
			e.Canonical, e.Leaf = string(c), base64.StdEncoding.EncodeToString(leaf[:])
		}
		v.Entries = append(v.Entries, e)
	}
	for i, e := range v.Entries { // entries 4, 5 and 7 have no canonical form, the others have one
		if bad := i == 4 || i == 5 || i == 7; (e.Canonical == "") != bad {
			t.Fatalf("vector %d %s: Go's canonical form %q", i, e.JSON, e.Canonical)
		}
	}

	ctx := context.Background()
	var log tlog.MemoryLog
	b64 := func(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }
	leaves := []tlog.Hash{}
	for i := range 13 {
		leaf := tlog.LeafHash([]byte(fmt.Sprintf(`{"n":%d}`, i)))
		leaves = append(leaves, leaf)
		if _, err := log.Append(leaf); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []int64{1, 2, 3, 5, 8, 13} {
		root, err := tlog.TreeHash(ctx, &log, size)
		if err != nil {
			t.Fatal(err)
		}
		for i := range size {
			p, err := tlog.InclusionProof(ctx, &log, size, i)
			if err != nil {
				t.Fatal(err)
			}
			hs := make([]string, len(p))
			for j, h := range p {
				hs[j] = b64(h)
			}
			v.Proofs = append(v.Proofs, jsProof{Size: size, Index: i, Root: b64(root), Leaf: b64(leaves[i]), Hashes: hs, Valid: true})
			if len(p) > 0 {
				bad := append([]string(nil), hs...)
				h := p[len(p)-1]
				h[0] ^= 1
				bad[len(bad)-1] = b64(h)
				v.Proofs = append(v.Proofs, jsProof{Size: size, Index: i, Root: b64(root), Leaf: b64(leaves[i]), Hashes: bad})
				v.Proofs = append(v.Proofs, jsProof{Size: size, Index: i, Root: b64(root), Leaf: b64(leaves[i]), Hashes: hs[:len(hs)-1]})
				v.Proofs = append(v.Proofs, jsProof{Size: size, Index: (i + 1) % size, Root: b64(root), Leaf: b64(leaves[i]), Hashes: hs})
			}
			v.Proofs = append(v.Proofs, jsProof{Size: size, Index: i, Root: b64(root), Leaf: b64(leaves[i]), Hashes: append(hs[:len(hs):len(hs)], b64(root))})
		}
	}

	org := uuid.New()
	origin := tlog.Origin("vectors.example", org, tlog.KindAudit)
	now := time.Now().UTC().Truncate(time.Millisecond)
	key, pub, err := tlog.GenerateKey("vectors-key", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	old, oldPub, err := tlog.GenerateKey("vectors-old", now.Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	oldPub = oldPub.Retire(now.Add(-24 * time.Hour))
	stranger, _, err := tlog.GenerateKey("vectors-key", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if v.KeysRaw, err = json.Marshal([]tlog.PublicKey{pub, oldPub}); err != nil {
		t.Fatal(err)
	}
	root := log.Root()
	sign := func(cp tlog.Checkpoint, k tlog.PrivateKey) string {
		n, err := tlog.Sign(cp, k)
		if err != nil {
			t.Fatal(err)
		}
		return string(n)
	}
	cp := tlog.Checkpoint{Origin: origin, Size: log.Size(), Root: root, Time: now}
	good := sign(cp, key)
	body, sig, _ := strings.Cut(good, "\n\n")
	otherOrg := cp
	otherOrg.Origin = tlog.Origin("vectors.example", uuid.New(), tlog.KindAudit)
	otherKind := cp
	otherKind.Origin = tlog.Origin("vectors.example", org, tlog.KindExecutions)
	sigBytes, _ := base64.StdEncoding.DecodeString(strings.Fields(sig)[2])
	sigBytes[10] ^= 0x40
	flipped := body + "\n\n" + strings.Join(strings.Fields(sig)[:2], " ") + " " + base64.StdEncoding.EncodeToString(sigBytes) + "\n"
	suffix := "/orgs/" + org.String() + "/audit_logs"
	v.Notes = []jsNote{
		{Name: "good", Note: good, Origin: suffix, Size: cp.Size, Root: b64(root)},
		{Name: "root changed", Note: strings.Replace(good, b64(root), b64(tlog.EmptyRoot), 1), Origin: suffix, Check: "signature"},
		{Name: "size changed", Note: strings.Replace(good, fmt.Sprintf("\n%d\n", cp.Size), fmt.Sprintf("\n%d\n", cp.Size+1), 1), Origin: suffix, Check: "signature"},
		{Name: "signature flipped", Note: flipped, Origin: suffix, Check: "signature"},
		{Name: "unknown key", Note: sign(cp, stranger), Origin: suffix, Check: "key"},
		{Name: "retired key", Note: sign(cp, old), Origin: suffix, Check: "key"},
		{Name: "another org", Note: sign(otherOrg, key), Origin: suffix, Check: "checkpoint"},
		{Name: "another log", Note: sign(otherKind, key), Origin: suffix, Check: "checkpoint"},
		{Name: "extra line", Note: strings.Replace(good, "\ntimestamp ", "\nx\ntimestamp ", 1), Origin: suffix, Check: "checkpoint"},
		{Name: "no signature", Note: body + "\n", Origin: suffix, Check: "checkpoint"},
	}
	// The Go verifier agrees with each expectation.
	ks, err := tlog.NewKeySet(pub, oldPub)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Notes {
		got, _, err := tlog.Open([]byte(n.Note), ks)
		if ok := err == nil && strings.HasSuffix(got.Origin, n.Origin); ok != (n.Check == "") {
			t.Fatalf("vector %q: Go's Open: %v (origin %q)", n.Name, err, got.Origin)
		}
	}
	return v
}

// testJSVectors runs tlog.js in the page on Go's vectors.
func testJSVectors(t *testing.T, d *dash) {
	v := makeJSVectors(t)
	in, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	script := `(async (v) => {
  const m = await import("/dashboard/static/js/tlog.js");
  const out = { entries: [], proofs: [], notes: [] };
  const b = (s) => m.fromBase64(s, 32);
  for (const e of v.entries) {
    try {
      const item = JSON.parse(e.json);
      out.entries.push({ canonical: m.canonicalEntry(item), leaf: m.toBase64(await m.leafHash(item)) });
    } catch (err) {
      out.entries.push({ error: String(err.check || err.message) });
    }
  }
  for (const p of v.proofs) {
    try {
      await m.checkRecord(p.hashes.map(b), p.size, b(p.root), p.index, b(p.leaf));
      out.proofs.push("ok");
    } catch (err) {
      out.proofs.push(err.check || String(err));
    }
  }
  for (const n of v.notes) {
    try {
      const cp = await m.openCheckpoint(n.note, v.keys, n.origin);
      out.notes.push({ check: "", size: cp.size, root: cp.rootB64, key: cp.key.key_id });
    } catch (err) {
      out.notes.push({ check: err.check || String(err), message: err.message });
    }
  }
  const ui = await import("/dashboard/static/js/verify.js");
  out.unsequenced = await ui.verifyEntry(null, "org", ui.AUDIT, { event_id: "e", leaf_index: null });
  return JSON.stringify(out);
})(` + string(in) + `)`
	raw := value(t, d, "vectors", chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	var got struct {
		Entries     []struct{ Canonical, Leaf, Error string }
		Proofs      []string
		Unsequenced struct{ State, Message string }
		Notes       []struct {
			Check, Root, Key, Message string
			Size                      int64
		}
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	for i, e := range v.Entries {
		g := got.Entries[i]
		switch {
		case e.Canonical == "" && g.Error != "canonical":
			t.Errorf("entry %d %s: Go finds no canonical form, JS gives %q (error %q)", i, e.JSON, g.Canonical, g.Error)
		case e.Canonical != "" && (g.Canonical != e.Canonical || g.Leaf != e.Leaf):
			t.Errorf("entry %d %s:\nJS %s %s (error %q)\nGo %s %s", i, e.JSON, g.Canonical, g.Leaf, g.Error, e.Canonical, e.Leaf)
		}
	}
	valid := 0
	for i, p := range v.Proofs {
		want := "proof"
		if p.Valid {
			want = "ok"
			valid++
		}
		if got.Proofs[i] != want {
			t.Errorf("proof of leaf %d in %d (%d hashes, valid %v): JS says %q", p.Index, p.Size, len(p.Hashes), p.Valid, got.Proofs[i])
		}
	}
	if valid < 30 || len(v.Proofs)-valid < 60 {
		t.Fatalf("only %d valid and %d bad proofs", valid, len(v.Proofs)-valid)
	}
	if u := got.Unsequenced; u.State != "pending" || !strings.HasPrefix(u.Message, "Not yet in the log") {
		t.Errorf("an entry whose leaf_index is null: %+v, want pending, not yet in the log", u)
	}
	for i, n := range v.Notes {
		g := got.Notes[i]
		if g.Check != n.Check {
			t.Errorf("note %q: JS says check %q (%s), want %q", n.Name, g.Check, g.Message, n.Check)
		}
		if n.Check == "" && (g.Size != n.Size || g.Root != n.Root) {
			t.Errorf("note %q: JS reads size %d root %s, want %d %s", n.Name, g.Size, g.Root, n.Size, n.Root)
		}
	}
}
