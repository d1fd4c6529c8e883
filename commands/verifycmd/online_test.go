package verifycmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/internal/tlog/verify"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// onlineEnv is the query role in process over a store (SQLite or
// ClickHouse) holding one organization's entries, sequenced and
// checkpointed, and an editor of that store behind the API's back.
type onlineEnv struct {
	st   onlineStore
	edit storeEditor
	org  uuid.UUID
	evs  []schemas.AuditEvent
	key  tlog.PrivateKey
	pub  tlog.PublicKey
	url  string
	mu   sync.Mutex
	keys []tlog.PublicKey // served by audit_keys
}

// onlineStore is what the env needs of a store: the entries and the logs.
type onlineStore interface {
	auditstore.Store
	auditstore.LogStore
	query.Reader
	sequencer.Store
}

// storeEditor edits a store directly, as someone with write access to
// its files or its server: each in its own dialect.
type storeEditor interface {
	// deleteEntry deletes the audit entry of event id.
	deleteEntry(t *testing.T, org uuid.UUID, id string)
	// rename sets the display name of the entry of event id.
	rename(t *testing.T, org uuid.UUID, id, name string)
	// swap exchanges the contents of two entries, keeping their ids and
	// places: the entry of a reads as b's and the other way round.
	swap(t *testing.T, org uuid.UUID, a, b string)
	// insertCopy stores a copy of the entry of event id under new ids,
	// renamed and created an hour earlier.
	insertCopy(t *testing.T, org uuid.UUID, id string)
	// deleteCheckpoints deletes the audit log's checkpoints larger than
	// above (all of them for -1).
	deleteCheckpoints(t *testing.T, org uuid.UUID, above int64)
}

type onlineAccess struct{}

func (onlineAccess) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != "k" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{ID: "k", Type: "API_KEY"}, nil
}

func (onlineAccess) AuthorizeRead(context.Context, auth.Principal, uuid.UUID, *uuid.UUID) error {
	return nil
}

// onlineKeys serves the env's public keys (audit_keys), those rotated out
// with them.
type onlineKeys struct{ e *onlineEnv }

func (k onlineKeys) PublicKeys(context.Context) ([]tlog.PublicKey, error) {
	k.e.mu.Lock()
	defer k.e.mu.Unlock()
	return slices.Clone(k.e.keys), nil
}

// rotate retires the signing key now and signs with a new one from now
// on, as the checkpointer's rotation does.
func (e *onlineEnv) rotate(t *testing.T) {
	t.Helper()
	time.Sleep(2 * time.Millisecond) // after the last checkpoint's millisecond
	now := time.Now().UTC().Truncate(time.Millisecond)
	key, pub, err := tlog.GenerateKey("e2e-key-2", now)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keys[len(e.keys)-1].NotAfter = &now
	e.keys = append(e.keys, pub)
	e.key, e.pub = key, pub
}

// onlineStores are the stores the online verifier's tests run on.
var onlineStores = []struct {
	name string
	open func(t *testing.T) (onlineStore, storeEditor)
}{
	{"sqlite", openSQLiteEdited},
	{"clickhouse", openClickHouseEdited},
}

func newOnlineEnv(t *testing.T, open func(*testing.T) (onlineStore, storeEditor), n int) *onlineEnv {
	t.Helper()
	e := startOnlineEnv(t, open, uuid.New())
	e.add(t, n)
	return e
}

// startOnlineEnv is the query role over an empty store, serving the keys
// of a new signing key.
func startOnlineEnv(t *testing.T, open func(*testing.T) (onlineStore, storeEditor), org uuid.UUID) *onlineEnv {
	t.Helper()
	e := &onlineEnv{org: org}
	e.st, e.edit = open(t)
	var err error
	if e.key, e.pub, err = tlog.GenerateKey("e2e-key", time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, e.st, onlineAccess{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.keys = []tlog.PublicKey{e.pub}
	qs.ServeAuditKeysWith(onlineKeys{e})
	app := httpapi.NewApp(nil)
	qs.Register(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	e.url = "http://" + ln.Addr().String()
	return e
}

// rewritten is the log of e as a server that rewrote it serves it: a new
// store holding e's entries but the one at leaf drop (those after it
// renumbered), sequenced again and signed by a new key of the same name,
// the only one its audit_keys lists.
func (e *onlineEnv) rewritten(t *testing.T, open func(*testing.T) (onlineStore, storeEditor), drop int) *onlineEnv {
	t.Helper()
	r := startOnlineEnv(t, open, e.org)
	if r.pub.KeyID == e.pub.KeyID {
		t.Fatal("the new key is the old one")
	}
	evs := slices.Delete(slices.Clone(e.evs), drop, drop+1)
	for i := range evs {
		evs[i].Stored.Seq = uint64(i + 1)
	}
	r.store(t, evs)
	return r
}

// keysFile writes the keys the env serves (GET /api/v1/audit_keys as it
// answers now) to a file, as a user saves them to pin them.
func (e *onlineEnv) keysFile(t *testing.T) string {
	t.Helper()
	e.mu.Lock()
	answer, err := json.Marshal(map[string]any{"code": 200, "msg": "success", "data": e.keys})
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(p, answer, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// add stores n entries, sequences them and signs a checkpoint.
func (e *onlineEnv) add(t *testing.T, n int) []byte {
	return e.addAged(t, n, 0)
}

// addAged stores n entries that happened age before they are stored (a
// backfill, for a large age), sequences them and signs a checkpoint.
func (e *onlineEnv) addAged(t *testing.T, n int, age time.Duration) []byte {
	t.Helper()
	gen := synth.New(e.org, 3, uint64(len(e.evs)+7))
	base := time.Now().Add(-time.Hour).UTC()
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		seq := len(e.evs) + i + 1
		at := base.Add(time.Duration(seq) * time.Millisecond)
		evs[i] = gen.Event(at.Add(-age))
		evs[i].Stored = schemas.Persisted{Seq: uint64(seq), Time: at}
	}
	return e.store(t, evs)
}

// store writes evs, sequences them and signs a checkpoint.
func (e *onlineEnv) store(t *testing.T, evs []schemas.AuditEvent) []byte {
	t.Helper()
	ctx := context.Background()
	if err := e.st.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	e.evs = append(e.evs, evs...)
	r, err := sequencer.New(e.st).Sequence(ctx, e.org, auditstore.LogAudit, uint64(len(e.evs)))
	if err != nil {
		t.Fatal(err)
	}
	return e.sign(t, r.Size, e.key, e.pub.KeyID)
}

func (e *onlineEnv) sign(t *testing.T, size int64, key tlog.PrivateKey, keyID string) []byte {
	t.Helper()
	ctx := context.Background()
	root, err := tlog.TreeHash(ctx, auditstore.LogReader{Store: e.st, Org: e.org, Kind: auditstore.LogAudit}, size)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	note, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("e2e.auditrail", e.org, tlog.KindAudit), Size: size, Root: root, Time: at}, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.SaveCheckpoint(ctx, e.org, auditstore.LogAudit, auditstore.Checkpoint{Size: size, Root: root, Time: at, KeyID: keyID, Note: note}); err != nil {
		t.Fatal(err)
	}
	return note
}

// verify runs auditrail verify --url on the env, the keys it serves now
// pinned.
func (e *onlineEnv) verify(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	return e.verifyWith(t, append([]string{"--keys", e.keysFile(t)}, extra...)...)
}

// verifyWith runs auditrail verify --url on the env with the flags given.
func (e *onlineEnv) verifyWith(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := verifyCmd(context.Background(), append([]string{"--url", e.url, "--key", "k", "--org", e.org.String()}, extra...), &out)
	return out.String(), err
}

// auditrail verify --url walks an organization through the API and
// verifies it; every edit of the SQLite file behind the log's back makes
// it fail, saying what was done.
func TestVerifyOnline(t *testing.T) {
	const n = 40
	ev := func(e *onlineEnv, i int) string { return e.evs[i].EventID.String() }
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, e *onlineEnv)
		says   []string // empty: verifies
		named  []int    // the entries named altered: "leaf i (event "<id>") was altered"
		size   int      // the entries that verify, when it does: n if 0
		flags  []string
	}{
		{name: "untouched"},
		{name: "backfilled: entries a month old stored last", tamper: func(t *testing.T, e *onlineEnv) {
			e.addAged(t, 5, 30*24*time.Hour)
		}, size: n + 5},
		{name: "deleted row", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.deleteEntry(t, e.org, ev(e, 5))
		}, says: []string{"FAIL: leaf 5 missing", "each of the 39 entries present below the checkpoint's size has a valid inclusion proof", "NOT VERIFIED: 1 problem in"}},
		{name: "altered field", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.rename(t, e.org, ev(e, 17), "Mallory")
		}, says: []string{"root differs"}, named: []int{17}},
		{name: "two entries' contents swapped", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.swap(t, e.org, ev(e, 3), ev(e, 4))
		}, says: []string{"root differs"}, named: []int{3, 4}},
		// A deleted entry does not hide an altered one: without a root to
		// compare, each entry present is checked by its inclusion proof.
		{name: "deleted row and altered field", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.deleteEntry(t, e.org, ev(e, 5))
			e.edit.rename(t, e.org, ev(e, 17), "Mallory")
		}, says: []string{"FAIL: leaf 5 missing: deleted", "NOT VERIFIED: 2 problems"}, named: []int{17}},
		{name: "two rows deleted and two fields altered", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.deleteEntry(t, e.org, ev(e, 2))
			e.edit.deleteEntry(t, e.org, ev(e, 30))
			e.edit.rename(t, e.org, ev(e, 11), "Mallory")
			e.edit.rename(t, e.org, ev(e, 39), "Mallory")
		}, says: []string{"FAIL: leaf 2 missing", "FAIL: leaf 30 missing", "NOT VERIFIED: 4 problems"}, named: []int{11, 39}},
		{name: "inserted row", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.insertCopy(t, e.org, ev(e, 9))
		}, says: []string{"is not in the log (leaf_index null)", "inserted into the store"}},
		{name: "inserted row within --pending-grace", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.insertCopy(t, e.org, ev(e, 9)) // stored two hours before the checkpoint
		}, flags: []string{"--pending-grace", "3h"}},
		{name: "newest rows deleted", tamper: func(t *testing.T, e *onlineEnv) {
			for i := n - 3; i < n; i++ {
				e.edit.deleteEntry(t, e.org, ev(e, i))
			}
		}, says: []string{"leaves 37..39 missing"}},
		{name: "two consecutive rows deleted", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.deleteEntry(t, e.org, ev(e, 20))
			e.edit.deleteEntry(t, e.org, ev(e, 21))
		}, says: []string{"leaves 20..21 missing"}},
		{name: "checkpoint signed by an unknown key", tamper: func(t *testing.T, e *onlineEnv) {
			other, pub, err := tlog.GenerateKey("mallory", time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			e.edit.deleteCheckpoints(t, e.org, -1)
			e.sign(t, n, other, pub.KeyID)
		}, says: []string{"FAIL: the log's latest checkpoint", "unknown key"}},
	} {
		for _, store := range onlineStores {
			t.Run(store.name+"/"+tc.name, func(t *testing.T) {
				e := newOnlineEnv(t, store.open, n)
				if tc.tamper != nil {
					tc.tamper(t, e)
				}
				out, err := e.verify(t, tc.flags...)
				t.Log("\n" + out)
				if len(tc.says) == 0 {
					size := cmp.Or(tc.size, n)
					if want := fmt.Sprintf("OK: %d entries (leaves 0..%d) match the checkpoint", size, size-1); err != nil || !strings.Contains(out, want) {
						t.Fatalf("the log does not verify (want %q): %v\n%s", want, err, out)
					}
					return
				}
				if err == nil {
					t.Fatalf("verified after the edit:\n%s", out)
				}
				for _, s := range tc.says {
					if !strings.Contains(out, s) {
						t.Fatalf("the report does not say %q:\n%s", s, out)
					}
				}
				for _, i := range tc.named {
					if s := fmt.Sprintf("FAIL: leaf %d (event %q) was altered", i, ev(e, i)); !strings.Contains(out, s) {
						t.Fatalf("the report does not say %q:\n%s", s, out)
					}
				}
				if got := strings.Count(out, ") was altered"); got != len(tc.named) {
					t.Fatalf("%d entries named altered, want %d:\n%s", got, len(tc.named), out)
				}
			})
		}
	}
}

// A checkpoint kept from an earlier run (--save-checkpoint) is extended by
// the log (the consistency proof verifies); a log rolled back below it, or
// rewritten since, fails.
func TestVerifyOnlineSinceCheckpoint(t *testing.T) {
	for _, store := range onlineStores {
		t.Run(store.name, func(t *testing.T) { testVerifyOnlineSinceCheckpoint(t, store.open) })
	}
}

func testVerifyOnlineSinceCheckpoint(t *testing.T, open func(*testing.T) (onlineStore, storeEditor)) {
	e := newOnlineEnv(t, open, 30)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if out, err := e.verify(t, "--save-checkpoint", kept); err != nil || !strings.Contains(out, "saved the verified checkpoint (size 30)") {
		t.Fatalf("%v\n%s", err, out)
	}
	// The key rotates between the kept checkpoint and the next (the
	// aws-cli verifier once checked every digest with the newest key).
	e.rotate(t)
	e.add(t, 12)
	out, err := e.verify(t, "--since-checkpoint", kept, "--save-checkpoint", kept)
	if err != nil || !strings.Contains(out, "OK: the consistency proof from the kept checkpoint (size 30) to size 42 verifies") {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := os.ReadFile(kept)
	if !strings.Contains(string(b), "\n42\n") {
		t.Fatalf("the kept checkpoint was not replaced: %s", b)
	}
	// Rolled back: the server presents an older, smaller checkpoint.
	e.sign(t, 20, e.key, e.pub.KeyID)
	e.edit.deleteCheckpoints(t, e.org, 20)
	out, err = e.verify(t, "--since-checkpoint", kept)
	if err == nil || !strings.Contains(out, "rolled back: the kept checkpoint") {
		t.Fatalf("a rolled-back log verifies: %v\n%s", err, out)
	}
}

// Usage mistakes exit 2: among them --url without --keys (unless
// --trust-server-keys says to trust the server's keys) and plain http to a
// host that is not loopback.
func TestVerifyOnlineUsage(t *testing.T) {
	e := newOnlineEnv(t, openSQLiteEdited, 1)
	keys := e.keysFile(t)
	online := func(extra ...string) []string {
		return append([]string{"--url", e.url, "--key", "k", "--org", e.org.String()}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		says []string
	}{
		{"no --org", []string{"--url", e.url, "--key", "k", "--keys", keys}, []string{"--org"}},
		{"no --key", []string{"--url", e.url, "--org", e.org.String(), "--keys", keys}, []string{"--key is required"}},
		{"unknown --kind", online("--keys", keys, "--kind", "nope"), []string{"--kind"}},
		{"--export with --url", online("--keys", keys, "--export", "x"), []string{"--url verifies online: --export is for an offline verification"}},
		{"--checkpoint with --url", online("--keys", keys, "--checkpoint", "x"), []string{"--checkpoint is for an offline verification"}},
		{"--pending-grace 0s", online("--keys", keys, "--pending-grace", "0s"), []string{"--pending-grace"}},
		{"neither --keys nor --trust-server-keys", online(), []string{"--url needs --keys FILE", "--trust-server-keys"}},
		{"--keys and --trust-server-keys", online("--keys", keys, "--trust-server-keys"), []string{"exclude each other"}},
		{"--max-export-bytes 0", online("--keys", keys, "--max-export-bytes", "0"), []string{"--max-export-bytes 0"}},
		{"http to a host name", []string{"--url", "http://audit.example.com", "--key", "k", "--org", e.org.String(), "--keys", keys}, []string{"https required"}},
		{"http to a private address", []string{"--url", "http://10.0.0.7:8080", "--key", "k", "--org", e.org.String(), "--trust-server-keys"}, []string{"https required"}},
		{"--trust-server-keys offline", []string{"--export", "x", "--keys", keys, "--trust-server-keys"}, []string{"--trust-server-keys is for --url"}},
		{"--wait offline", []string{"--export", "x", "--keys", keys, "--wait", "5s"}, []string{"--wait is for --url"}},
		{"--wait -1s", online("--keys", keys, "--wait", "-1s"), []string{"--wait -1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := verifyCmd(context.Background(), tc.args, &out)
			var u cli.UsageError
			if !errors.As(err, &u) {
				t.Fatalf("%v, want a usage error\n%s", err, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error()+out.String(), "Bearer") {
				t.Errorf("the API key's header shows: %v", err)
			}
		})
	}
}

// Plain http only to a loopback host; https anywhere.
func TestVerifyOnlineURL(t *testing.T) {
	org := uuid.NewString()
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://127.9.8.7:8080/base", true},
		{"http://[::1]:8080", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://[::ffff:127.0.0.1]:8080", true},
		{"https://audit.example.com", true},
		{"https://10.0.0.7:8443", true},
		{"http://audit.example.com", false},
		{"http://10.0.0.7:8080", false},
		{"http://0.0.0.0:8080", false},
		{"http://[::]:8080", false},
		{"http://192.168.1.1", false},
		{"http://localhost.example.com:8080", false},
		{"http://127.0.0.1.example.com:8080", false},
	} {
		_, err := verify.ParseOnline(tc.url, "k", org, "audit")
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v, want accepted %v", tc.url, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "https required") {
			t.Errorf("%s: %v does not say https is required", tc.url, err)
		}
	}
}

// A server that rewrote its log (an entry removed, the leaves renumbered)
// and signed it with a new key it now lists fails against the pinned
// keys; trusting the server's keys it passes, with a warning that says
// what that proves.
func TestVerifyOnlinePinnedKeys(t *testing.T) {
	for _, store := range onlineStores {
		t.Run(store.name, func(t *testing.T) {
			e := newOnlineEnv(t, store.open, 30)
			pinned := e.keysFile(t)
			if out, err := e.verifyWith(t, "--keys", pinned); err != nil || strings.Contains(out, "WARNING") {
				t.Fatalf("the genuine log: %v\n%s", err, out)
			}
			r := e.rewritten(t, store.open, 12)
			out, err := r.verifyWith(t, "--keys", pinned)
			t.Log("\n" + out)
			var u cli.UsageError
			if err == nil || errors.As(err, &u) {
				t.Fatalf("the rewritten log: %v, want a failed verification (exit 1)\n%s", err, out)
			}
			for _, s := range []string{
				"FAIL: the log's latest checkpoint: checkpoint signed by unknown key " + r.pub.KeyID,
				"the signer is not pinned",
				"note: the server lists that key (" + r.pub.KeyID,
			} {
				if !strings.Contains(out, s) {
					t.Fatalf("the report does not say %q:\n%s", s, out)
				}
			}
			if strings.Contains(out, "OK:") {
				t.Fatalf("an OK line:\n%s", out)
			}

			// The server's keys: the rewritten log is consistent, which
			// is all that can show, and the output says so.
			out, err = r.verifyWith(t, "--trust-server-keys")
			t.Log("\n" + out)
			if err != nil || !strings.Contains(out, "OK: 29 entries (leaves 0..28) match the checkpoint") {
				t.Fatalf("the rewritten log with --trust-server-keys: %v\n%s", err, out)
			}
			if !strings.HasPrefix(out, "WARNING: --trust-server-keys: the checkpoint is checked against the keys this server lists, not keys you pinned") ||
				!strings.HasSuffix(out, "WARNING: --trust-server-keys: consistent with the keys the server lists, not authenticated by keys you pinned\n") {
				t.Fatalf("no WARNING line first and last:\n%s", out)
			}
		})
	}
}

// The inclusion proofs are a request per entry, which the audit API's
// rate limit counts: a 429 is waited out (its Retry-After), and the
// altered entry is still named.
func TestVerifyOnlineRateLimited(t *testing.T) {
	e := newOnlineEnv(t, openSQLiteEdited, 40)
	e.edit.deleteEntry(t, e.org, e.evs[5].EventID.String())
	e.edit.rename(t, e.org, e.evs[17].EventID.String(), "Mallory")
	var mu sync.Mutex
	proofs, limited := 0, 0
	limiter := e.proxy(t, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/proof") {
			return false
		}
		if proofs++; proofs%10 != 3 {
			return false
		}
		limited++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":429,"msg":"rate limit exceeded"}`))
		return true
	})
	var out bytes.Buffer
	err := verifyCmd(context.Background(), []string{"--url", limiter, "--key", "k", "--org", e.org.String(), "--keys", e.keysFile(t)}, &out)
	t.Log("\n" + out.String())
	if err == nil {
		t.Fatal("verified")
	}
	if s := fmt.Sprintf("FAIL: leaf 17 (event %q) was altered", e.evs[17].EventID.String()); !strings.Contains(out.String(), "FAIL: leaf 5 missing") || !strings.Contains(out.String(), s) {
		t.Fatalf("the report does not name both the deleted and the altered entry:\n%s", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if limited == 0 || strings.Contains(out.String(), "could not be located") {
		t.Fatalf("%d of %d proofs refused with 429: %s", limited, proofs, out.String())
	}
}

// An entry whose proof the server does not have (404) is named; what the
// server says is quoted, not printed as lines of the report.
func TestVerifyOnlineProofRefused(t *testing.T) {
	e := newOnlineEnv(t, openSQLiteEdited, 20)
	e.edit.deleteEntry(t, e.org, e.evs[5].EventID.String())
	id := e.evs[12].EventID.String()
	srv := e.proxy(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/proof") || r.URL.Query().Get("event_id") != id {
			return false
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":404,"msg":"no such event\nOK: 20 entries match"}`))
		return true
	})
	var out bytes.Buffer
	err := verifyCmd(context.Background(), []string{"--url", srv, "--key", "k", "--org", e.org.String(), "--keys", e.keysFile(t)}, &out)
	t.Log("\n" + out.String())
	want := fmt.Sprintf(`FAIL: leaf 12 (event %q) is not in the log at that place: the proof route answered 404 ("no such event\nOK: 20 entries match")`, id)
	if err == nil || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "\nOK:") {
		t.Fatalf("%v, want %s:\n%s", err, want, out.String())
	}
}

// proxy is a server in front of the env's that answers the requests
// handle takes and passes the others on.
func (e *onlineEnv) proxy(t *testing.T, handle func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !handle(w, r) {
			httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The export is written to a temporary file of at most --max-export-bytes:
// a larger one, or a server that sends without end, fails; the file is
// removed whatever the outcome.
func TestVerifyOnlineExportBound(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newOnlineEnv(t, openSQLiteEdited, 40)
	endless := e.proxy(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/audit_logs/export") {
			return false
		}
		line := []byte(`{"checkpoint":"` + strings.Repeat("x", 1000) + `"}` + "\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				break
			}
		}
		return true
	})
	for _, tc := range []struct {
		name, url, max string
		says           string // "": verifies
	}{
		{"within the bound", e.url, "1000000", ""},
		{"over the bound", e.url, "1000", "the export is larger than --max-export-bytes (1000 bytes)"},
		{"a server that sends without end", endless, "1048576", "the export is larger than --max-export-bytes (1048576 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := verifyCmd(context.Background(), []string{"--url", tc.url, "--key", "k", "--org", e.org.String(),
				"--keys", e.keysFile(t), "--max-export-bytes", tc.max}, &out)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Fatalf("%v, want %q\n%s", err, tc.says, out.String())
			}
			left, err := filepath.Glob(filepath.Join(tmp, "auditrail-verify-*"))
			if err != nil || len(left) > 0 {
				t.Fatalf("temporary files left: %v %v", left, err)
			}
		})
	}
}

// --wait: the verification waits for a checkpoint that covers the newest
// entry listed (one signed while it waits is the one verified), and says
// so when none came in time.
func TestVerifyOnlineWait(t *testing.T) {
	e := newOnlineEnv(t, openSQLiteEdited, 10)
	sequenced := func(n int) {
		t.Helper()
		gen := synth.New(e.org, 3, uint64(len(e.evs)+7))
		evs := make([]schemas.AuditEvent, n)
		for i := range evs {
			seq := len(e.evs) + i + 1
			at := time.Now().Add(-time.Hour).UTC().Add(time.Duration(seq) * time.Millisecond)
			evs[i] = gen.Event(at)
			evs[i].Stored = schemas.Persisted{Seq: uint64(seq), Time: at}
		}
		if err := e.st.WriteAudit(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
		e.evs = append(e.evs, evs...)
		if _, err := sequencer.New(e.st).Sequence(context.Background(), e.org, auditstore.LogAudit, uint64(len(e.evs))); err != nil {
			t.Fatal(err)
		}
	}
	sequenced(5) // leaves 10..14, no checkpoint covers them yet
	go func() {
		time.Sleep(700 * time.Millisecond)
		e.sign(t, 15, e.key, e.pub.KeyID)
	}()
	out, err := e.verify(t, "--wait", "20s")
	if err != nil || !strings.Contains(out, "OK: 15 entries") || strings.Contains(out, "note: waited") {
		t.Fatalf("--wait did not verify the checkpoint signed while it waited: %v\n%s", err, out)
	}
	sequenced(5) // leaves 15..19, never signed
	out, err = e.verify(t, "--wait", "1s")
	if err != nil || !strings.Contains(out, "note: waited 1s: the latest checkpoint (size 15) does not cover the newest entry (leaf 19) yet") ||
		!strings.Contains(out, "OK: 15 entries") {
		t.Fatalf("--wait 1s without a new checkpoint: %v\n%s", err, out)
	}
}
