package query_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/verify"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

type keySource []tlog.PublicKey

func (k keySource) PublicKeys(context.Context) ([]tlog.PublicKey, error) { return k, nil }

// get answers a route's status and body, checked against audit.yaml.
func (e *logEnv) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", "http://auditrail.test"+path, nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := e.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(path, "/export") && !e.nocheck {
		if e.router == nil {
			e.router = openapitest.Router(t, "audit.yaml", "http://auditrail.test")
		}
		openapitest.CheckResponse(t, e.router, req, resp.StatusCode, resp.Header, raw)
	}
	return resp.StatusCode, raw
}

func (e *logEnv) data(t *testing.T, path string, v any) {
	t.Helper()
	code, raw := e.get(t, path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, raw)
	}
	if err := json.Unmarshal(raw, &struct{ Data any }{v}); err != nil {
		t.Fatal(err)
	}
}

func hashes(t *testing.T, ss []string) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("hash %q", s)
		}
		copy(out[i][:], b)
	}
	return out
}

// The checkpoint, proof and consistency routes answer what verifies
// against the signed checkpoints, and refuse what they cannot prove.
func TestLogRoutes(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	e := newLogEnv(t, 300)
	first := e.size
	firstNote := e.checkpoint(t, 120) // an older checkpoint kept beside the latest
	e.add(t, 77)
	base := "/api/v1/orgs/" + e.org.String() + "/audit_logs/"
	ks, err := tlog.NewKeySet(e.pub)
	if err != nil {
		t.Fatal(err)
	}
	var latest query.CheckpointData
	e.data(t, base+"checkpoint", &latest)
	cp, _, err := tlog.Open([]byte(latest.Note), ks)
	if err != nil || cp.Size != 377 || latest.Size != 377 || latest.Origin != cp.Origin || latest.KeyID != e.pub.KeyID ||
		latest.RootHash != base64.StdEncoding.EncodeToString(cp.Root[:]) {
		t.Fatalf("latest checkpoint %+v: %+v %v", latest, cp, err)
	}
	var at120 query.CheckpointData
	e.data(t, base+"checkpoint?size=120", &at120)
	if at120.Note != string(firstNote) {
		t.Fatalf("checkpoint of 120: %q", at120.Note)
	}
	cp120, _, err := tlog.Open(firstNote, ks)
	if err != nil {
		t.Fatal(err)
	}
	// Every entry's proof against the latest checkpoint and against the
	// one of 120 for the entries it holds.
	for i, ev := range e.evs {
		var p query.ProofData
		e.data(t, base+"proof?event_id="+ev.EventID.String(), &p)
		if p.LeafIndex != int64(i) || p.Size != cp.Size {
			t.Fatalf("event %d: leaf %d of %d", i, p.LeafIndex, p.Size)
		}
		leaf := hashes(t, []string{p.LeafHash})[0]
		if err := tlog.VerifyInclusion(cp.Size, cp.Root, p.LeafIndex, leaf, hashes(t, p.Hashes)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if i%37 == 0 && i < 120 {
			e.data(t, base+"proof?size=120&event_id="+ev.EventID.String(), &p)
			if err := tlog.VerifyInclusion(120, cp120.Root, p.LeafIndex, leaf, hashes(t, p.Hashes)); err != nil {
				t.Fatalf("event %d in 120: %v", i, err)
			}
		}
	}
	for _, c := range [][2]int64{{0, 377}, {1, 377}, {120, 377}, {first, 377}, {377, 377}, {120, 120}} {
		var d query.ConsistencyData
		e.data(t, fmt.Sprintf("%sconsistency?from=%d&to=%d", base, c[0], c[1]), &d)
		fromRoot, err := tlog.TreeHash(context.Background(), auditstore.LogReader{Store: e.st, Org: e.org, Kind: auditstore.LogAudit}, c[0])
		if err != nil {
			t.Fatal(err)
		}
		toRoot, _ := tlog.TreeHash(context.Background(), auditstore.LogReader{Store: e.st, Org: e.org, Kind: auditstore.LogAudit}, c[1])
		if err := tlog.VerifyConsistency(c[0], fromRoot, c[1], toRoot, hashes(t, d.Hashes)); err != nil {
			t.Fatalf("consistency %v: %v", c, err)
		}
	}
	// The tree of one leaf: an empty proof, the leaf is the root.
	var p, p1 query.ProofData
	e.data(t, base+"proof?size=1&event_id="+e.evs[0].EventID.String(), &p1)
	root1, _ := tlog.TreeHash(context.Background(), auditstore.LogReader{Store: e.st, Org: e.org, Kind: auditstore.LogAudit}, 1)
	if len(p1.Hashes) != 0 || p1.LeafHash != base64.StdEncoding.EncodeToString(root1[:]) {
		t.Fatalf("proof in the tree of 1: %+v", p1)
	}
	// A proof that does not verify against another checkpoint's root: the
	// routes do not answer hashes that happen to fit anything.
	e.data(t, base+"proof?event_id="+e.evs[5].EventID.String(), &p)
	if tlog.VerifyInclusion(cp.Size, cp120.Root, 5, hashes(t, []string{p.LeafHash})[0], hashes(t, p.Hashes)) == nil {
		t.Fatal("a proof verifies against another root")
	}

	other := uuid.New()
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{base + "checkpoint?size=121", 404, "no checkpoint of size 121"},
		{"/api/v1/orgs/" + other.String() + "/audit_logs/checkpoint", 404, "no checkpoint"},
		{"/api/v1/orgs/" + e.org.String() + "/tool_executions/checkpoint", 404, "no checkpoint"},
		{base + "checkpoint?size=-1", 400, "size"},
		{base + "checkpoint?size=", 400, "size"},
		{base + "checkpoint?size=1&size=2", 400, "size"},
		{base + "checkpoint?limit=1", 400, "limit"},
		{base + "proof?event_id=" + uuid.NewString(), 404, "not in the log"},
		{base + "proof", 400, "event_id"},
		{base + "proof?event_id=x", 400, "event_id"},
		{base + "proof?event_id=" + e.evs[0].EventID.String() + "&size=378", 400, "beyond the log's size 377"},
		{base + "proof?event_id=" + e.evs[200].EventID.String() + "&size=120", 400, "leaf 200, not in the tree of 120"},
		{base + "proof?event_id=" + e.evs[0].EventID.String() + "&size=0", 400, "size"},
		{base + "proof?event_id=" + e.evs[0].EventID.String() + "&cursor=x", 400, "cursor"},
		{base + "consistency?from=2", 400, "to"},
		{base + "consistency?to=2", 400, "from"},
		{base + "consistency?from=3&to=2", 400, "from"},
		{base + "consistency?from=3&to=378", 400, "beyond"},
		{base + "consistency?from=a&to=3", 400, "from"},
		{"/api/v1/orgs/nope/audit_logs/proof?event_id=" + e.evs[0].EventID.String(), 400, "org_id"},
	} {
		code, raw := e.get(t, tc.path)
		if code != tc.code || !strings.Contains(string(raw), tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.path, code, raw, tc.code, tc.says)
		}
	}
	// audit_keys: 503 until a key source is given, then the keys.
	if code, _ := e.get(t, "/api/v1/audit_keys"); code != 503 {
		t.Fatalf("audit_keys without keys: %d", code)
	}
	e.qs.ServeAuditKeysWith(keySource{e.pub})
	var keys []json.RawMessage
	e.data(t, "/api/v1/audit_keys", &keys)
	if b, _ := json.Marshal(keys); !bytes.Contains(b, []byte(e.pub.KeyID)) {
		t.Fatalf("audit_keys: %s", b)
	}
}

// Every listed, fed and exported entry carries its leaf_index (null until
// sequenced), and a JSONL export from the route verifies offline, ending
// with the checkpoint; the CSV export has a leaf_index column.
func TestLeafIndexesListedAndExported(t *testing.T) {
	e := newLogEnv(t, 250)
	// 3 entries stored but not sequenced yet.
	fresh := tlogEvents(e.org, 3, uint64(len(e.evs)))
	for i := range fresh {
		fresh[i].Timestamp = time.Now().Add(time.Duration(i) * time.Millisecond) // listed first
		fresh[i].Stored.Time = fresh[i].Timestamp                                // stored now: not due in the log yet
	}
	if err := e.st.WriteAudit(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for i, ev := range e.evs {
		want[ev.EventID.String()] = int64(i)
	}
	var page struct {
		Items []map[string]any `json:"items"`
	}
	e.data(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs?limit=100", &page)
	nulls := 0
	for _, it := range page.Items {
		id := it["event_id"].(string)
		x, listed := it["leaf_index"]
		if !listed {
			t.Fatalf("%s has no leaf_index member", id)
		}
		if w, ok := want[id]; ok {
			if x != float64(w) {
				t.Fatalf("%s: leaf_index %v, want %d", id, x, w)
			}
		} else if x != nil {
			t.Fatalf("unsequenced %s: leaf_index %v", id, x)
		} else {
			nulls++
		}
	}
	if nulls != 3 {
		t.Fatalf("%d null leaf indexes, want 3", nulls)
	}
	code, body := e.get(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format=jsonl")
	if code != 200 {
		t.Fatalf("export: %d %s", code, body)
	}
	lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
	if len(lines) != 254 || !bytes.HasPrefix(lines[253], []byte(`{"checkpoint":"`)) {
		t.Fatalf("%d lines, last %s", len(lines), lines[len(lines)-1])
	}
	ks, _ := tlog.NewKeySet(e.pub)
	rep, err := verify.Export(context.Background(), bytes.NewReader(body), verify.Config{Keys: ks})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	if !rep.OK() || rep.Checkpoint.Size != 250 || rep.Pending != 3 {
		t.Fatalf("the route's export does not verify:\n%s", out.String())
	}
	// The same export with one entry altered does not.
	altered := append([][]byte{}, lines...)
	altered[10] = bytes.Replace(lines[10], []byte(`"display_name":"`), []byte(`"display_name":"X`), 1)
	bad := bytes.Join(altered, []byte("\n"))
	if rep, err := verify.Export(context.Background(), bytes.NewReader(bad), verify.Config{Keys: ks}); err != nil || rep.OK() {
		t.Fatalf("an altered export verifies: %v", err)
	}
	_, csvBody := e.get(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format=csv")
	ids := csvIDs(t, csvBody, "event_id")
	idx := csvIDs(t, csvBody, "leaf_index")
	for i, id := range ids {
		if w, ok := want[id]; ok && idx[i] != fmt.Sprint(w) || !ok && idx[i] != "" {
			t.Fatalf("csv %s: leaf_index %q", id, idx[i])
		}
	}
}

// countingLogs counts the hash reads of a store.
type countingLogs struct {
	*sqlite.Store
	reads atomic.Int64
}

func (c *countingLogs) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, idx []int64) ([][32]byte, error) {
	c.reads.Add(1)
	return c.Store.ReadLogHashes(ctx, org, kind, idx)
}

// A proof answered through the cache (a small one that evicts, and a
// large one that ends up answering without the store) equals the proof
// read without a cache; each proof reads the store's hashes once at most.
func TestProofCacheEqualsStore(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	e := newLogEnv(t, 600)
	e.checkpoint(t, 333)
	store := &countingLogs{Store: e.st}
	answers := map[int64]map[string]string{}
	for _, bytes := range []int64{-1, 3000, 64 << 20} {
		cfg := query.DefaultConfig()
		cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
		cfg.ProofCacheBytes = bytes
		qs, err := query.New(cfg, store, allowAll{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		env := *e
		env.nocheck = true // TestLogRoutes checks the answers against audit.yaml
		env.app = httpapi.NewApp(nil)
		qs.Register(env.app)
		answers[bytes] = map[string]string{}
		for round := range 2 {
			store.reads.Store(0)
			n := 0
			for i, ev := range e.evs {
				// Every fifth entry and those around the checkpoint's size
				// and the log's end: each proof shape, a tenth of the
				// requests.
				if i%5 != 0 && i != 332 && i != 333 && i != len(e.evs)-1 {
					continue
				}
				for _, size := range []string{"", "&size=333", "&size=600"} {
					if size == "&size=333" && i >= 333 {
						continue
					}
					path := "/api/v1/orgs/" + e.org.String() + "/audit_logs/proof?event_id=" + ev.EventID.String() + size
					code, raw := env.get(t, path)
					if code != 200 {
						t.Fatalf("%s: %d %s", path, code, raw)
					}
					n++
					if round == 0 && bytes == -1 {
						answers[-1][path] = string(raw)
					} else if answers[-1][path] != string(raw) {
						t.Fatalf("cache of %d bytes, %s:\n%s\nwithout a cache:\n%s", bytes, path, raw, answers[-1][path])
					}
				}
			}
			reads := store.reads.Load()
			if reads > int64(n) {
				t.Fatalf("cache of %d bytes: %d hash reads for %d proofs", bytes, reads, n)
			}
			if bytes == 64<<20 && round == 1 && reads != 0 {
				t.Fatalf("a warm cache read the store %d times", reads)
			}
		}
	}
}

// countingLeaves counts the leaf index queries of a store and their size.
type countingLeaves struct {
	*sqlite.Store
	calls atomic.Int64
	most  atomic.Int64
}

func (c *countingLeaves) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]int64, error) {
	c.calls.Add(1)
	if int64(len(ids)) > c.most.Load() {
		c.most.Store(int64(len(ids)))
	}
	return c.Store.LeafIndexes(ctx, org, kind, ids)
}

// An export asks the leaf indexes once per page of ExportPageSize, a list
// page once; every exported entry carries its own.
func TestLeafIndexesOnePerPage(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	n := query.ExportPageSize + 1500
	e := newLogEnv(t, n)
	store := &countingLeaves{Store: e.st}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	// It counts queries, not time: a page of 10,000 entries read from
	// SQLite under the race detector, beside the package's other parallel
	// tests, may take longer than a store query's default bound.
	cfg.StoreTimeout = 2 * time.Minute
	qs, err := query.New(cfg, store, allowAll{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.app = httpapi.NewApp(nil)
	qs.Register(e.app)
	code, body := e.get(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format=jsonl")
	if code != 200 {
		t.Fatalf("export: %d", code)
	}
	if c := store.calls.Load(); c != 2 || store.most.Load() != int64(query.ExportPageSize) {
		t.Fatalf("%d leaf index queries (largest %d) for an export of %d entries, want 2", c, store.most.Load(), n)
	}
	want := map[string]int64{}
	for i, ev := range e.evs {
		want[ev.EventID.String()] = int64(i)
	}
	lines := bytes.Split(bytes.TrimSpace(body), []byte("\n"))
	for _, l := range lines[:len(lines)-1] {
		var it struct {
			EventID   string `json:"event_id"`
			LeafIndex *int64 `json:"leaf_index"`
		}
		if err := json.Unmarshal(l, &it); err != nil || it.LeafIndex == nil || *it.LeafIndex != want[it.EventID] {
			t.Fatalf("line %s: %v", l, err)
		}
	}
	store.calls.Store(0)
	e.get(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs?limit=100")
	if c := store.calls.Load(); c != 1 {
		t.Fatalf("%d leaf index queries for a list page", c)
	}
	// The listed entries' proofs need no leaf index query (the list warmed
	// the cache).
	var page struct {
		Items []struct {
			EventID string `json:"event_id"`
		} `json:"items"`
	}
	e.data(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs?limit=5", &page)
	store.calls.Store(0)
	for _, it := range page.Items {
		var p query.ProofData
		e.data(t, "/api/v1/orgs/"+e.org.String()+"/audit_logs/proof?event_id="+it.EventID, &p)
	}
	if c := store.calls.Load(); c != 0 {
		t.Fatalf("%d leaf index queries for the proofs of listed entries", c)
	}
}
