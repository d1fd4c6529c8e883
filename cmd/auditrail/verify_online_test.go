package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/sequencer"
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
	e := &onlineEnv{org: uuid.New()}
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
	e.add(t, n)
	return e
}

// add stores n entries, sequences them and signs a checkpoint.
func (e *onlineEnv) add(t *testing.T, n int) []byte {
	return e.addAged(t, n, 0)
}

// addAged stores n entries that happened age before they are stored (a
// backfill, for a large age), sequences them and signs a checkpoint.
func (e *onlineEnv) addAged(t *testing.T, n int, age time.Duration) []byte {
	t.Helper()
	ctx := context.Background()
	gen := synth.New(e.org, 3, uint64(len(e.evs)+7))
	base := time.Now().Add(-time.Hour).UTC()
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		seq := len(e.evs) + i + 1
		at := base.Add(time.Duration(seq) * time.Millisecond)
		evs[i] = gen.Event(at.Add(-age))
		evs[i].Stored = schemas.Persisted{Seq: uint64(seq), Time: at}
	}
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

func (e *onlineEnv) verify(t *testing.T, extra ...string) (string, error) {
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
		size   int      // the entries that verify, when it does: n if 0
		flags  []string
	}{
		{name: "untouched"},
		{name: "backfilled: entries a month old stored last", tamper: func(t *testing.T, e *onlineEnv) {
			e.addAged(t, 5, 30*24*time.Hour)
		}, size: n + 5},
		{name: "deleted row", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.deleteEntry(t, e.org, ev(e, 5))
		}, says: []string{"leaf 5 missing"}},
		{name: "altered field", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.rename(t, e.org, ev(e, 17), "Mallory")
		}, says: []string{"root differs", "FAIL: leaf 17 (event \""}},
		{name: "two entries' contents swapped", tamper: func(t *testing.T, e *onlineEnv) {
			e.edit.swap(t, e.org, ev(e, 3), ev(e, 4))
		}, says: []string{"root differs", "FAIL: leaf 3 (event", "FAIL: leaf 4 (event"}},
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

// Usage mistakes exit 2.
func TestVerifyOnlineUsage(t *testing.T) {
	e := newOnlineEnv(t, openSQLiteEdited, 1)
	var u usageError
	for _, args := range [][]string{
		{"--url", e.url, "--key", "k"},
		{"--url", e.url, "--org", e.org.String()},
		{"--url", e.url, "--key", "k", "--org", e.org.String(), "--kind", "nope"},
		{"--url", e.url, "--key", "k", "--org", e.org.String(), "--export", "x"},
		{"--url", e.url, "--key", "k", "--org", e.org.String(), "--pending-grace", "0s"},
	} {
		if err := verifyCmd(context.Background(), args, &bytes.Buffer{}); !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
