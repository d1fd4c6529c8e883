package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/sequencer"
)

// onlineEnv is the query role in process over a SQLite file holding one
// organization's entries, sequenced and checkpointed.
type onlineEnv struct {
	path string
	st   *sqlite.Store
	org  uuid.UUID
	evs  []schemas.AuditEvent
	key  tlog.PrivateKey
	pub  tlog.PublicKey
	url  string
	db   *sql.DB
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

type onlineKeys []tlog.PublicKey

func (k onlineKeys) PublicKeys(context.Context) ([]tlog.PublicKey, error) { return k, nil }

func newOnlineEnv(t *testing.T, n int) *onlineEnv {
	t.Helper()
	e := &onlineEnv{path: filepath.Join(t.TempDir(), "audit.db"), org: uuid.New()}
	var err error
	if e.st, err = sqlite.Open(context.Background(), e.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	if e.key, e.pub, err = tlog.GenerateKey("e2e-key", time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, e.st, onlineAccess{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	qs.ServeAuditKeysWith(onlineKeys{e.pub})
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
	t.Helper()
	ctx := context.Background()
	gen := synth.New(e.org, 3, uint64(len(e.evs)+7))
	base := time.Now().Add(-time.Hour).UTC()
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		seq := len(e.evs) + i + 1
		evs[i] = gen.Event(base.Add(time.Duration(seq) * time.Millisecond))
		evs[i].Stored = schemas.Persisted{Seq: uint64(seq), Time: base.Add(time.Duration(seq) * time.Millisecond)}
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
	root, err := tlog.TreeHash(ctx, tlogReader{e}, size)
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

type tlogReader struct{ e *onlineEnv }

func (r tlogReader) ReadHashes(ctx context.Context, idx []int64) ([]tlog.Hash, error) {
	hs, err := r.e.st.ReadLogHashes(ctx, r.e.org, auditstore.LogAudit, idx)
	out := make([]tlog.Hash, len(hs))
	for i := range hs {
		out[i] = hs[i]
	}
	return out, err
}

// exec edits the SQLite file directly, as someone with write access to it
// (one connection for the test: its temporary tables last).
func (e *onlineEnv) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if e.db == nil {
		db, err := sql.Open("sqlite", "file:"+e.path)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		e.db = db
	}
	res, err := e.db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(q, "CREATE") {
		t.Fatalf("%s: no row changed", q)
	}
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
	}{
		{name: "untouched"},
		{name: "deleted row", tamper: func(t *testing.T, e *onlineEnv) {
			e.exec(t, `DELETE FROM audit_logs WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, 5))
		}, says: []string{"leaf 5 missing"}},
		{name: "altered field", tamper: func(t *testing.T, e *onlineEnv) {
			e.exec(t, `UPDATE audit_logs SET display_name = 'Mallory' WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, 17))
		}, says: []string{"root differs", "FAIL: leaf 17 (event \""}},
		{name: "two entries' contents swapped", tamper: func(t *testing.T, e *onlineEnv) {
			// Everything but the ids: the entry at leaf 3 reads as leaf 4's.
			cols := "display_name, principal_id, principal_type, action, source, resource_type, resource_id, resource_display, data, ts_ms"
			e.exec(t, `CREATE TEMP TABLE a AS SELECT `+cols+` FROM audit_logs WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, 3))
			e.exec(t, `UPDATE audit_logs SET (`+cols+`) = (SELECT `+cols+` FROM audit_logs b WHERE b.organization_id = ?1 AND b.event_id = ?3)
				WHERE organization_id = ?1 AND event_id = ?2`, e.org.String(), ev(e, 3), ev(e, 4))
			e.exec(t, `UPDATE audit_logs SET (`+cols+`) = (SELECT `+cols+` FROM a) WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, 4))
		}, says: []string{"root differs", "FAIL: leaf 3 (event", "FAIL: leaf 4 (event"}},
		{name: "inserted row", tamper: func(t *testing.T, e *onlineEnv) {
			e.exec(t, `CREATE TEMP TABLE x AS SELECT * FROM audit_logs WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, 9))
			e.exec(t, `UPDATE x SET event_id = ?, id = ?, display_name = 'Mallory', created_ms = created_ms - 3600000`, uuid.NewString(), uuid.NewString())
			e.exec(t, `INSERT INTO audit_logs SELECT * FROM x`)
		}, says: []string{"is not in the log (leaf_index null)", "inserted into the store"}},
		{name: "newest rows deleted", tamper: func(t *testing.T, e *onlineEnv) {
			for i := n - 3; i < n; i++ {
				e.exec(t, `DELETE FROM audit_logs WHERE organization_id = ? AND event_id = ?`, e.org.String(), ev(e, i))
			}
		}, says: []string{"leaves 37..39 missing"}},
		{name: "checkpoint signed by an unknown key", tamper: func(t *testing.T, e *onlineEnv) {
			other, pub, err := tlog.GenerateKey("mallory", time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			e.exec(t, `DELETE FROM log_checkpoints WHERE log_id = (SELECT log_id FROM log_heads WHERE organization_id = ? AND kind = 0)`, e.org.String())
			e.sign(t, n, other, pub.KeyID)
		}, says: []string{"FAIL: the log's latest checkpoint", "unknown key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOnlineEnv(t, n)
			if tc.tamper != nil {
				tc.tamper(t, e)
			}
			out, err := e.verify(t)
			t.Log("\n" + out)
			if len(tc.says) == 0 {
				if err != nil || !strings.Contains(out, "OK: 40 entries (leaves 0..39) match the checkpoint") {
					t.Fatalf("an untouched log does not verify: %v\n%s", err, out)
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

// A checkpoint kept from an earlier run (--save-checkpoint) is extended by
// the log (the consistency proof verifies); a log rolled back below it, or
// rewritten since, fails.
func TestVerifyOnlineSinceCheckpoint(t *testing.T) {
	e := newOnlineEnv(t, 30)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if out, err := e.verify(t, "--save-checkpoint", kept); err != nil || !strings.Contains(out, "saved the verified checkpoint (size 30)") {
		t.Fatalf("%v\n%s", err, out)
	}
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
	e.exec(t, `DELETE FROM log_checkpoints WHERE log_id = (SELECT log_id FROM log_heads WHERE organization_id = ? AND kind = 0) AND size > 20`, e.org.String())
	out, err = e.verify(t, "--since-checkpoint", kept)
	if err == nil || !strings.Contains(out, "rolled back: the kept checkpoint") {
		t.Fatalf("a rolled-back log verifies: %v\n%s", err, out)
	}
	// Usage mistakes exit 2.
	var u usageError
	for _, args := range [][]string{
		{"--url", e.url, "--key", "k"},
		{"--url", e.url, "--org", e.org.String()},
		{"--url", e.url, "--key", "k", "--org", e.org.String(), "--kind", "nope"},
		{"--url", e.url, "--key", "k", "--org", e.org.String(), "--export", "x"},
	} {
		if err := verifyCmd(context.Background(), args, &bytes.Buffer{}); !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
