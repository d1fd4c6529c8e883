package query_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/getkin/kin-openapi/routers"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// tileStore is a store whose logs the tiles serve, and that a test fills,
// sequences, expires and erases.
type tileStore interface {
	query.Reader
	query.ExecutionReader
	sequencer.Store
	auditstore.LogStore
	auditstore.LifecycleStore
	auditstore.ErasureStore
	WriteAudit(ctx context.Context, events []schemas.AuditEvent) error
	WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error
}

// tileStores are the stores the tile tests run on: SQLite, and a
// throwaway ClickHouse (missing: skipped, or failed with
// AUDITRAIL_REQUIRE_ALL=1) whose entries are stored with their leaves, as
// production stores them.
var tileStores = []struct {
	name string
	open func(t *testing.T) tileStore
}{
	{"sqlite", func(t *testing.T) tileStore {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"clickhouse", func(t *testing.T) tileStore {
		st, err := clickhouse.OpenWith(context.Background(), testenv.ClickHouse(t), clickhouse.Options{Leaves: apiitem.Leaves{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// tileEnv is an organization's two logs in a store, sequenced and
// checkpointed as the tlog role does, behind a query server on a real
// listener whose callers authenticate as orgKeys says ("key-<org>").
type tileEnv struct {
	st   tileStore
	org  uuid.UUID
	key  tlog.PrivateKey
	pub  tlog.PublicKey
	seqr *sequencer.Sequencer
	base string // the server's URL
	tr   *http.Transport
	// seq is the stream sequence of the last entry written; ids the
	// event ids of each log's entries in their order (the leaves').
	seq uint64
	ids map[auditstore.LogKind][]uuid.UUID
	// router checks answers against audit.yaml.
	router routers.Router
	// failed is set by a 5xx answer to the tile client, which cancels
	// ctx (torchwood retries those for minutes).
	ctx    context.Context
	fail   context.CancelFunc
	failed atomic.Value
}

var kindPaths = map[auditstore.LogKind]string{auditstore.LogAudit: "audit_logs", auditstore.LogExecutions: "tool_executions"}

func newTileEnv(t *testing.T, st tileStore) *tileEnv {
	t.Helper()
	e := &tileEnv{st: st, org: uuid.New(), seqr: sequencer.New(st), ids: map[auditstore.LogKind][]uuid.UUID{}}
	var err error
	e.key, e.pub, err = tlog.GenerateKey("tiles-test", time.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, st, orgKeys{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(slog.New(slog.NewTextHandler(io.Discard, nil)))
	qs.Register(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	e.base = "http://" + ln.Addr().String()
	e.tr = &http.Transport{MaxIdleConnsPerHost: 64}
	e.ctx, e.fail = context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(func() {
		e.fail()
		e.tr.CloseIdleConnections()
		_ = app.ShutdownWithTimeout(5 * time.Second)
		<-served
	})
	e.router = openapitest.Router(t, "audit.yaml", e.base)
	return e
}

// salted tells which entries carry a salt (a leaf of version 2): the
// 256 leaves of every odd bundle, so that bundles of either version
// alone exist.
func salted(i int) bool { return i/query.TileWidth%2 == 1 }

// add writes n more entries of kind (the i-th of the log salted when
// salted(i)), sequences them and signs a checkpoint of the log's size.
func (e *tileEnv) add(t *testing.T, kind auditstore.LogKind, n int) {
	t.Helper()
	ctx := context.Background()
	have := len(e.ids[kind])
	base := time.Now().Add(-time.Hour).UTC()
	if kind == auditstore.LogAudit {
		evs := tlogEvents(e.org, n, e.seq)
		for i := range evs {
			if salted(have + i) {
				evs[i].Salt = storetest.Salt(have + i)
			}
			e.ids[kind] = append(e.ids[kind], evs[i].EventID)
		}
		for i := 0; i < len(evs); i += 5000 {
			if err := e.st.WriteAudit(ctx, evs[i:min(i+5000, len(evs))]); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		evs := make([]schemas.ExecutionEvent, n)
		for i := range evs {
			at := base.Add(time.Duration(have+i) * time.Millisecond)
			evs[i] = schemas.ExecutionEvent{EventID: uuid.NewString(), ExecutionID: uuid.NewString(), OrganizationID: e.org.String(),
				UserID: fmt.Sprintf("user-%d@example.com", i%7), PrincipalID: "svc", PrincipalType: "SERVICE_KEY", DisplayName: "User",
				ClientIP: "10.0.0.7", Tool: schemas.ToolRef{Toolkit: "Docs", Name: "Read", Version: "1"}, StartedAt: at,
				EndedAt: at.Add(3 * time.Millisecond), DurationMS: 3, Success: i%5 != 0, ExecutionCode: "OK",
				Hooks: []schemas.HookCall{}, Stored: schemas.Persisted{Seq: e.seq + uint64(i) + 1, Time: at}}
			if !evs[i].Success {
				evs[i].ExecutionCode, evs[i].ExecutionError, evs[i].ErrorKind = "E", "no access", "FATAL"
			}
			if salted(have + i) {
				evs[i].Salt = storetest.Salt(have + i)
			}
			e.ids[kind] = append(e.ids[kind], uuid.MustParse(evs[i].EventID))
		}
		if err := e.st.WriteExecutions(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	e.seq += uint64(n)
	r, err := e.seqr.Sequence(ctx, e.org, kind, e.seq)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size != int64(len(e.ids[kind])) {
		t.Fatalf("the %s log has %d leaves, %d entries were written", kind, r.Size, len(e.ids[kind]))
	}
	e.sign(t, kind)
}

// sign signs and stores a checkpoint of kind's log at its size.
func (e *tileEnv) sign(t *testing.T, kind auditstore.LogKind) []byte {
	t.Helper()
	size, _, err := e.st.LogHead(context.Background(), e.org, kind)
	if err != nil {
		t.Fatal(err)
	}
	return e.signAt(t, kind, size)
}

// signAt signs and stores a checkpoint of kind's log at size (at most the
// log's).
func (e *tileEnv) signAt(t *testing.T, kind auditstore.LogKind, size int64) []byte {
	t.Helper()
	ctx := context.Background()
	root, err := tlog.TreeHash(ctx, auditstore.LogReader{Store: e.st, Org: e.org, Kind: kind}, size)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	cp := tlog.Checkpoint{Origin: tlog.Origin("tiles.test", e.org, tlog.Kind(kind)), Size: size, Root: root, Time: at}
	n, err := tlog.Sign(cp, e.key)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SaveCheckpoint(ctx, e.org, kind, auditstore.Checkpoint{Size: size, Root: root, Time: at, KeyID: e.pub.KeyID, Note: n}); err != nil {
		t.Fatal(err)
	}
	return n
}

// prefix is the tiles' prefix of kind's log.
func (e *tileEnv) prefix(kind auditstore.LogKind) string {
	return e.base + "/api/v1/orgs/" + e.org.String() + "/" + kindPaths[kind] + "/tlog/"
}

// bearer adds a credential to every request, and fails the test (and its
// tile client's context) on a 5xx answer, which torchwood would retry.
type bearer struct {
	e   *tileEnv
	key string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := b.e.tr.RoundTrip(r)
	if err == nil && resp.StatusCode >= 500 {
		b.e.failed.Store(fmt.Sprintf("%s: %d", r.URL.Path, resp.StatusCode))
		b.e.fail()
	}
	return resp, err
}

// client is a tlog-tiles client of kind's log (torchwood), as the org's
// member.
func (e *tileEnv) client(t *testing.T, kind auditstore.LogKind) (*torchwood.TileFetcher, *torchwood.Client) {
	t.Helper()
	f, err := torchwood.NewTileFetcher(e.prefix(kind), torchwood.WithHTTPClient(&http.Client{Transport: bearer{e, "key-" + e.org.String()}}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := torchwood.NewClient(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// check fails the test with err, and with a 5xx the tile client met.
func (e *tileEnv) check(t *testing.T, what string, err error) {
	t.Helper()
	if f := e.failed.Load(); f != nil {
		t.Fatalf("%s: the server answered %v", what, f)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// verifyLog checks kind's log through its tiles alone, as a tlog-tiles
// client: the checkpoint opens with the log's key and is the stored one
// byte for byte; entries taken here and there prove their inclusion; every
// entry bundle of the log matches the tree (torchwood hashes each entry
// and checks it against the level-0 tiles, which it checks against the
// root); the tree extends prev (a consistency proof from the tiles). It
// answers the checkpoint's tree.
func (e *tileEnv) verifyLog(t *testing.T, kind auditstore.LogKind, prev xtlog.Tree) xtlog.Tree {
	t.Helper()
	f, c := e.client(t, kind)
	ids := e.ids[kind]
	tree := e.checkpointTree(t, f, kind, int64(len(ids)))
	for _, i := range []int64{0, tree.N - 1, tree.N / 2, 255, 256, 257, 511, 65_535, 65_536, 69_999} {
		if i >= tree.N {
			continue
		}
		entry, _, err := c.Entry(e.ctx, tree, i)
		e.check(t, fmt.Sprintf("entry %d", i), err)
		checkEntry(t, i, entry, ids[i])
	}
	next := int64(0)
	for next < tree.N {
		from := next
		for i, entry := range c.Entries(e.ctx, tree, next) {
			if i != next {
				t.Fatalf("Entries answered entry %d after %d", i, next-1)
			}
			checkEntry(t, i, entry, ids[i])
			next++
		}
		e.check(t, fmt.Sprintf("entries from %d", from), c.Err())
		if next == from {
			t.Fatalf("Entries stopped at %d of %d", next, tree.N)
		}
	}
	if prev.N > 0 {
		p, err := xtlog.ProveTree(tree.N, prev.N, torchwood.TileHashReaderWithContext(e.ctx, tree, f))
		e.check(t, fmt.Sprintf("consistency %d..%d", prev.N, tree.N), err)
		if err := xtlog.CheckTree(p, tree.N, tree.Hash, prev.N, prev.Hash); err != nil {
			t.Fatalf("the tree of %d does not extend the tree of %d: %v", tree.N, prev.N, err)
		}
	}
	return tree
}

// checkpointTree reads the checkpoint of kind's log through f: the stored
// note byte for byte, which opens with the log's key, of the log's origin
// and of size leaves; it answers its tree.
func (e *tileEnv) checkpointTree(t *testing.T, f *torchwood.TileFetcher, kind auditstore.LogKind, size int64) xtlog.Tree {
	t.Helper()
	raw, err := f.ReadEndpoint(e.ctx, "checkpoint")
	e.check(t, "checkpoint", err)
	stored, _, err := e.st.LatestCheckpoint(context.Background(), e.org, kind)
	if err != nil || !bytes.Equal(raw, stored.Note) {
		t.Fatalf("the checkpoint served is not the stored note: %q, %v", raw, err)
	}
	v, err := e.pub.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		t.Fatalf("the checkpoint does not open with the log's key: %v", err)
	}
	cp, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil {
		t.Fatal(err)
	}
	if cp.N != size || cp.Origin != tlog.Origin("tiles.test", e.org, tlog.Kind(kind)) {
		t.Fatalf("checkpoint of %s, %d leaves; want %d", cp.Origin, cp.N, size)
	}
	return cp.Tree
}

// checkEntry checks that entry (a bundle's, whose hash torchwood checked
// against the tree) is the preimage of the leaf of event id: its
// event_id, and a leaf of version 2 exactly for a salted entry.
func checkEntry(t *testing.T, i int64, entry []byte, id uuid.UUID) {
	t.Helper()
	var m struct {
		EventID     string `json:"event_id"`
		LeafVersion int    `json:"leaf_version"`
	}
	if err := json.Unmarshal(entry, &m); err != nil {
		t.Fatalf("entry %d is not JSON: %v", i, err)
	}
	if m.EventID != id.String() || (m.LeafVersion == 2) != salted(int(i)) {
		t.Fatalf("entry %d is event %s of leaf version %d; want event %s (salted %v)", i, m.EventID, m.LeafVersion, id, salted(int(i)))
	}
}

// Each log is served as a C2SP tlog-tiles log that torchwood reads and
// verifies with nothing but the log's public key, as it grows across tile
// boundaries: a tree of 1 leaf, partial and full tiles of leaves, 257 (a
// level-1 partial tile), 600; on both stores, for audit entries and tool
// executions, leaves of both versions. (TestTilesLargeLog has the tiles
// of levels 1 and 2 of a log of 70,000 leaves.)
func TestTilesServeTheLogs(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	for _, s := range tileStores {
		t.Run(s.name, func(t *testing.T) {
			e := newTileEnv(t, s.open(t))
			for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
				grow := []int{1, 255, 256, 257, 600}
				if kind == auditstore.LogExecutions {
					grow = []int{1, 300}
				}
				var prev xtlog.Tree
				for _, n := range grow {
					e.add(t, kind, n-len(e.ids[kind]))
					prev = e.verifyLog(t, kind, prev)
				}
			}
		})
	}
}

// A log of 65,536 leaves, then 70,000 (a full tile of level 1, then a
// partial one and a partial tile of level 2), read through its hash tiles
// alone by a tlog-tiles client: each checkpoint's root is the tree hash
// of the tiles (x/mod's TileHashReader checks every tile against it), the
// leaves' inclusion proofs made from the tiles check against the root,
// and the tree of 70,000 extends the one of 65,536. Its leaves have no
// entries (built as TestProofOneReadWhenWarm's): its bundles are not
// served. On ClickHouse, where such a log builds in a second or two;
// TestTilesLargeLogSQLite runs it on SQLite (not under the race detector,
// where the log takes 20 s to build).
func TestTilesLargeLog(t *testing.T) {
	t.Parallel()
	largeLog(t, tileStores[1].open(t))
}

// largeLog is TestTilesLargeLog on st.
func largeLog(t *testing.T, st tileStore) {
	e := newTileEnv(t, st)
	ids := buildLog(t, e.st, e.org, 70_000)
	var prev xtlog.Tree
	for _, n := range []int64{65_536, 70_000} {
		e.signAt(t, auditstore.LogAudit, n)
		f, _ := e.client(t, auditstore.LogAudit)
		tree := e.checkpointTree(t, f, auditstore.LogAudit, n)
		r := torchwood.TileHashReaderWithContext(e.ctx, tree, f)
		root, err := xtlog.TreeHash(tree.N, r)
		e.check(t, fmt.Sprintf("tree hash of %d", n), err)
		if root != tree.Hash {
			t.Fatalf("the tiles' tree hash of %d is not the checkpoint's root", n)
		}
		for _, i := range []int64{0, 255, 256, 65_535, n - 1, n / 3} {
			p, err := xtlog.ProveRecord(tree.N, i, r)
			e.check(t, fmt.Sprintf("proof of leaf %d in %d", i, n), err)
			if err := xtlog.CheckRecord(p, tree.N, tree.Hash, i, xtlog.RecordHash(ids[i][:])); err != nil {
				t.Fatalf("leaf %d in the tree of %d: %v", i, n, err)
			}
		}
		if prev.N > 0 {
			p, err := xtlog.ProveTree(tree.N, prev.N, r)
			e.check(t, fmt.Sprintf("consistency %d..%d", prev.N, n), err)
			if err := xtlog.CheckTree(p, tree.N, tree.Hash, prev.N, prev.Hash); err != nil {
				t.Fatalf("the tree of %d does not extend the tree of %d: %v", n, prev.N, err)
			}
		}
		prev = tree
	}
	for _, c := range []struct {
		path string
		code int
	}{{"tile/1/000", 200}, {"tile/1/001.p/17", 200}, {"tile/2/000.p/1", 200}, {"tile/1/001", 404}, {"tile/2/000", 404}, {"tile/3/000.p/1", 404}} {
		if code, _, body := e.get(t, "key-"+e.org.String(), auditstore.LogAudit, c.path); code != c.code {
			t.Errorf("%s: %d %.200s; want %d", c.path, code, body, c.code)
		}
	}
}

// get answers a GET of the tiles of kind's log with key, checked against
// audit.yaml when the path is one it describes (an index of one group).
func (e *tileEnv) get(t *testing.T, key string, kind auditstore.LogKind, path string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", e.prefix(kind)+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Transport: e.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.router.FindRoute(req); err == nil || resp.StatusCode == 200 {
		openapitest.CheckResponse(t, e.router, req, resp.StatusCode, resp.Header, body)
	}
	if resp.StatusCode != 200 { // the error's message, unescaped
		var env struct{ Msg string }
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("%s: %d, not an envelope: %s", path, resp.StatusCode, body)
		}
		body = []byte(env.Msg)
	}
	return resp.StatusCode, resp.Header, body
}

// leafKey is the feed position of leaf i of kind's log.
func (e *tileEnv) leaf(t *testing.T, kind auditstore.LogKind, i int64) (auditstore.LogLeaf, [32]byte) {
	t.Helper()
	ls, err := e.st.LeafRange(context.Background(), e.org, kind, i, i+1)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := e.st.ReadLogHashes(context.Background(), e.org, kind, []int64{xtlog.StoredHashIndex(0, i)})
	if err != nil {
		t.Fatal(err)
	}
	return ls[0], hs[0]
}

// storedEntry is the audit entry of event id as stored.
func (e *tileEnv) storedEntry(t *testing.T, id uuid.UUID) schemas.AuditEntry {
	t.Helper()
	p, err := e.st.FeedAudit(context.Background(), auditstore.FeedQuery{OrgID: e.org, Upto: e.seq, Limit: auditstore.FeedMaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range p.Items {
		if x.EventID == id {
			return x
		}
	}
	t.Fatalf("event %s is not stored", id)
	return schemas.AuditEntry{}
}

// erase rewrites audit leaf i as an erasure does: its display name
// replaced and its salt cleared, with the fields of its erasure when its
// leaf is of version 2 (tlog.OpenErased, as lifecycle computes them).
func (e *tileEnv) erase(t *testing.T, i int64) {
	t.Helper()
	l, leaf := e.leaf(t, auditstore.LogAudit, i)
	x := e.storedEntry(t, l.EventID)
	pseudonym := "erased-0123456789abcdef"
	rw := auditstore.Rewrite{EventID: l.EventID, Erasure: uuid.New(), LeafHash: leaf,
		Set: map[string]*string{"display_name": &pseudonym, auditstore.SaltColumn: nil}}
	if len(x.Salt) > 0 {
		after := x
		after.DisplayName = pseudonym
		before, _ := json.Marshal(apiitem.NewItem(&x))
		now, _ := json.Marshal(apiitem.NewItem(&after))
		f, err := tlog.OpenErased(before, now, x.Salt)
		if err != nil {
			t.Fatal(err)
		}
		if rw.Fields, err = json.Marshal(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RewriteEntries(context.Background(), e.org, auditstore.LogAudit, []auditstore.Rewrite{rw}); err != nil {
		t.Fatal(err)
	}
}

// The tiles answer the list routes' authorization, refuse what is not a
// tile of the log (malformed: 400 saying what is wrong; beyond the log's
// size: 404), carry the headers C2SP asks for, serve the checkpoint with
// the witnesses' cosignatures byte for byte, keep serving a bundle whose
// entry of version 2 was erased (the same bytes), and refuse a bundle
// that cannot be served: an entry expired (410), erased with a leaf of
// version 1 (410), deleted behind the log's back (500), too large for a
// bundle (422); each naming its first such leaf (a bundle cut before it
// is served). On both stores.
func TestTilesRefuse(t *testing.T) {
	t.Parallel()
	for _, s := range tileStores {
		t.Run(s.name, func(t *testing.T) {
			e := newTileEnv(t, s.open(t))
			const A, X = auditstore.LogAudit, auditstore.LogExecutions
			e.add(t, A, 800) // bundles 0 and 2 of version 1, 1 and 3.p/32 of version 2
			member, other := "key-"+e.org.String(), "key-"+uuid.NewString()
			signed := e.sign(t, A)
			hashes := func(level int, lo, n int64) []byte {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = xtlog.StoredHashIndex(level, lo+int64(i))
				}
				hs, err := e.st.ReadLogHashes(context.Background(), e.org, A, idx)
				if err != nil {
					t.Fatal(err)
				}
				var b []byte
				for _, h := range hs {
					b = append(b, h[:]...)
				}
				return b
			}
			const immutable, v1 = query.CacheImmutable, query.CacheBundleV1
			for _, c := range []struct {
				key   string
				kind  auditstore.LogKind
				path  string
				code  int
				says  string // in the body (an error's message)
				cache string
				body  []byte
			}{
				// What is served, and how it is cached.
				{member, A, "checkpoint", 200, "", query.CacheCheckpoint, signed},
				{"admin", A, "checkpoint", 200, "", query.CacheCheckpoint, signed},
				{member, A, "tile/0/000", 200, "", immutable, hashes(0, 0, 256)},
				{member, A, "tile/0/003.p/32", 200, "", immutable, hashes(0, 768, 32)},
				{member, A, "tile/0/003.p/5", 200, "", immutable, hashes(0, 768, 5)},
				{member, A, "tile/1/000.p/3", 200, "", immutable, hashes(8, 0, 3)},
				{member, A, "tile/entries/000", 200, "", v1, nil},
				{member, A, "tile/entries/001", 200, "", immutable, nil},
				{member, A, "tile/entries/002", 200, "", v1, nil},
				{member, A, "tile/entries/003.p/32", 200, "", immutable, nil},
				// Beyond the log's size.
				{member, A, "tile/0/003", 404, "tile/0/003 is not in the log (yet): its hashes need a log of 1024 leaves, it has 800", "", nil},
				{member, A, "tile/0/003.p/33", 404, "need a log of 801 leaves", "", nil},
				{member, A, "tile/0/004.p/1", 404, "not in the log", "", nil},
				{member, A, "tile/1/000.p/4", 404, "need a log of 1024 leaves", "", nil},
				{member, A, "tile/1/000", 404, "need a log of 65536 leaves", "", nil},
				{member, A, "tile/2/000.p/1", 404, "need a log of 65536 leaves", "", nil},
				{member, A, "tile/7/x036/x028/x797/x018/x963/968", 404, "more than 2^63-1", "", nil},
				{member, A, "tile/entries/003", 404, "its entries need a log of 1024 leaves", "", nil},
				{member, A, "tile/entries/003.p/33", 404, "not in the log", "", nil},
				{member, X, "checkpoint", 404, "no checkpoint of this log yet", "", nil},
				{member, X, "tile/0/000.p/1", 404, "it has 0", "", nil},
				{member, X, "tile/entries/000.p/1", 404, "it has 0", "", nil},
				// Malformed paths.
				{member, A, "tile/0/1", 400, "3-digit groups", "", nil},
				{member, A, "tile/0/0001", 400, "3-digit groups", "", nil},
				{member, A, "tile/0/x001", 400, "3-digit groups", "", nil},
				{member, A, "tile/0/001/002", 400, "3-digit groups", "", nil},
				{member, A, "tile/0/x000/001", 400, "x000", "", nil},
				{member, A, "tile/0/00a", 400, "3-digit groups", "", nil},
				{member, A, "tile/0/000.p/256", 400, "a full tile is written without .p/256", "", nil},
				{member, A, "tile/0/000.p/0", 400, "not in 1..255", "", nil},
				{member, A, "tile/0/000.p/300", 400, "not in 1..255", "", nil},
				{member, A, "tile/0/000.p/07", 400, `the width "07"`, "", nil},
				{member, A, "tile/0/000.p", 400, "width is missing", "", nil},
				{member, A, "tile/entries/000.p/256", 400, "a full tile", "", nil},
				{member, A, "tile/8/000", 400, "levels 0 to 7", "", nil},
				{member, A, "tile/63/000", 400, "levels 0 to 7", "", nil},
				{member, A, "tile/01/000", 400, `the level "01"`, "", nil},
				{member, A, "tile/-1/000", 400, "the level", "", nil},
				{member, A, "tile/data/000", 400, "the level", "", nil},
				{member, A, "tile/0", 400, "want tile/<L>/<N>", "", nil},
				{member, A, "tile/", 400, "want tile/<L>/<N>", "", nil},
				{member, A, "tile/entries", 400, "want tile/<L>/<N>", "", nil},
				{member, A, "tile/0/x999/x999/x999/x999/x999/x999/x999/999", 400, "beyond 2^63-1", "", nil},
				// Query parameters, as every other route.
				{member, A, "checkpoint?size=800", 400, "size", "", nil},
				{member, A, "tile/0/000?x=1", 400, "x", "", nil},
				// Credentials, as the list routes: authentication first.
				{"", A, "checkpoint", 401, "", "", nil},
				{"", A, "tile/0/000", 401, "", "", nil},
				{"", A, "tile/0/1", 401, "", "", nil},
				{"nobody", A, "tile/entries/000", 401, "", "", nil},
				{other, A, "checkpoint", 403, "not a member", "", nil},
				{other, A, "tile/0/000", 403, "not a member", "", nil},
				{other, A, "tile/entries/000", 403, "not a member", "", nil},
				{other, A, "tile/0/999", 403, "not a member", "", nil},
				{other, X, "checkpoint", 403, "not a member", "", nil},
			} {
				code, h, body := e.get(t, c.key, c.kind, c.path)
				if code != c.code || !strings.Contains(string(body), c.says) {
					t.Errorf("%s %s: %d %.300s; want %d saying %q", kindPaths[c.kind], c.path, code, body, c.code, c.says)
					continue
				}
				if code != 200 {
					continue
				}
				wantType := "application/octet-stream"
				if c.path == "checkpoint" {
					wantType = "text/plain; charset=utf-8"
				}
				if h.Get("Content-Type") != wantType || h.Get("Cache-Control") != c.cache {
					t.Errorf("%s: Content-Type %q, Cache-Control %q; want %q, %q", c.path, h.Get("Content-Type"), h.Get("Cache-Control"), wantType, c.cache)
				}
				if c.body != nil && !bytes.Equal(body, c.body) {
					t.Errorf("%s: %d bytes, not the %d expected", c.path, len(body), len(c.body))
				}
			}

			// A witness's cosignature added to the latest checkpoint: the
			// longer note is served, byte for byte, and opens with both.
			_, wkey, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			w, err := torchwood.NewCosignatureSigner("witness.test/w1", wkey)
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.pub.Verifier()
			if err != nil {
				t.Fatal(err)
			}
			n, err := note.Open(signed, note.VerifierList(v))
			if err != nil {
				t.Fatal(err)
			}
			cosigned, err := note.Sign(n, w)
			if err != nil {
				t.Fatal(err)
			}
			cp, _, err := e.st.LatestCheckpoint(context.Background(), e.org, A)
			if err != nil {
				t.Fatal(err)
			}
			cp.Note = cosigned
			if err := e.st.SaveCheckpoint(context.Background(), e.org, A, cp); err != nil {
				t.Fatal(err)
			}
			if _, _, got := e.get(t, member, A, "checkpoint"); !bytes.Equal(got, cosigned) {
				t.Fatalf("the cosigned checkpoint is served as\n%s\nwant\n%s", got, cosigned)
			} else if n, err := note.Open(got, note.VerifierList(v, w.Verifier())); err != nil || len(n.Sigs) != 2 {
				t.Fatalf("the cosigned checkpoint: %v", err)
			}

			// An erased entry of version 2 (leaf 300): its bundle is
			// served as before, byte for byte, and still verifies.
			_, _, before := e.get(t, member, A, "tile/entries/001")
			e.erase(t, 300)
			if code, h, after := e.get(t, member, A, "tile/entries/001"); code != 200 || !bytes.Equal(after, before) || h.Get("Cache-Control") != immutable {
				t.Fatalf("the bundle of an erased entry of version 2: %d %q, the same bytes %v", code, h.Get("Cache-Control"), bytes.Equal(after, before))
			}
			tree := e.verifyLog(t, A, xtlog.Tree{})
			_, c := e.client(t, A)
			if entry, _, err := c.Entry(e.ctx, tree, 300); err != nil || bytes.Contains(entry, []byte("erased-")) {
				t.Fatalf("the erased entry of version 2 through torchwood: %v %s", err, entry)
			}

			// Leaves 0..2 expire; leaf 520 (version 1) is erased; leaf 400
			// is deleted by hand (no record); leaf 800 (version 1) is over
			// 65,535 bytes.
			l2, _ := e.leaf(t, A, 2)
			if err := e.st.SaveExpiry(context.Background(), e.org, A, auditstore.Expiry{Record: uuid.New(), RecordLeaf: 799, BelowLeaf: 3,
				Last: l2.Key, CutoffMS: time.Now().UnixMilli(), Retention: 400 * 24 * time.Hour, Expired: 3, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if n, err := e.st.DeleteExpired(context.Background(), e.org, A, l2.Key, time.Now().UnixMilli()+1, nil); err != nil || n != 3 {
				t.Fatalf("DeleteExpired = %d, %v", n, err)
			}
			e.erase(t, 520)
			l400, _ := e.leaf(t, A, 400)
			keep := map[uuid.UUID]bool{}
			for _, id := range e.ids[A][:400] {
				keep[id] = true
			}
			if n, err := e.st.DeleteExpired(context.Background(), e.org, A, l400.Key, time.Now().UnixMilli()+1, keep); err != nil || n != 1 {
				t.Fatalf("deleting leaf 400 by hand = %d, %v", n, err)
			}
			big := tlogEvents(e.org, 1, e.seq)
			big[0].Data = json.RawMessage(`{"blob":"` + strings.Repeat("a", 70_000) + `"}`)
			if err := e.st.WriteAudit(context.Background(), big); err != nil {
				t.Fatal(err)
			}
			e.seq++
			e.ids[A] = append(e.ids[A], big[0].EventID)
			if _, err := e.seqr.Sequence(context.Background(), e.org, A, e.seq); err != nil {
				t.Fatal(err)
			}
			e.sign(t, A)
			id := func(i int) string { return e.ids[A][i].String() }
			for _, c := range []struct {
				path string
				code int
				says string
			}{
				{"tile/entries/000", 410, "leaf 0 (event " + id(0) + ") expired under the organization's retention of 400d"},
				{"tile/entries/000.p/1", 410, "leaf 0 (event " + id(0) + ") expired"},
				{"tile/entries/001.p/144", 200, ""},
				{"tile/entries/001", 500, "internal error"},
				{"tile/entries/002", 410, "leaf 520 (event " + id(520) + ") was erased by erasure"},
				{"tile/entries/002.p/8", 200, ""},
				{"tile/entries/003.p/32", 200, ""},
				{"tile/entries/003.p/33", 422, "the entry of leaf 800 (event " + id(800) + ") is over the 65535 bytes"},
				{"tile/0/003.p/33", 200, ""},
			} {
				code, _, body := e.get(t, member, A, c.path)
				if code != c.code || !strings.Contains(string(body), c.says) {
					t.Errorf("%s: %d %.300s; want %d saying %q", c.path, code, body, c.code, c.says)
				}
			}
		})
	}
}

// Every tile path the server accepts is the one torchwood (C2SP
// tlog-tiles) writes for the same tile, and every path torchwood parses
// to a tile of a level up to 7 the server accepts as that tile.
func FuzzParseTilePath(f *testing.F) {
	for _, p := range []string{"0/000", "0/x001/234", "entries/000.p/5", "7/x009/x223/x372/x036/854/775", "1/000.p/255",
		"0/000.p/256", "8/000", "01/000", "0/x000/001", "entries/x001/x002/003.p/1", "0/1", "0/000.p/07"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		ours, err := query.ParseTilePath(p)
		theirs, terr := torchwood.ParseTilePath("tile/" + p)
		if err == nil {
			if terr != nil || theirs != ours || query.TilePath(ours) != "tile/"+p || torchwood.TilePath(ours) != "tile/"+p {
				t.Fatalf("%q: ours %+v, torchwood %+v, %v", p, ours, theirs, terr)
			}
			return
		}
		if terr == nil && theirs.L <= query.MaxTileLevel && torchwood.TilePath(theirs) == "tile/"+p {
			t.Fatalf("%q: torchwood reads %+v, we refuse: %v", p, theirs, err)
		}
	})
}
