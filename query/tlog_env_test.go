package query_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/routers"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// logEnv is an organization's audit log in SQLite, sequenced and
// checkpointed, behind a query server that lets anyone read.
type logEnv struct {
	st   *sqlite.Store
	org  uuid.UUID
	evs  []schemas.AuditEvent
	key  tlog.PrivateKey
	pub  tlog.PublicKey
	app  *fiber.App
	qs   *query.Server
	size int64
	// router checks answers against audit.yaml (nocheck: not)
	router  routers.Router
	nocheck bool
}

// tlogEvents returns n events of org with stream sequences from+1…
func tlogEvents(org uuid.UUID, n int, from uint64) []schemas.AuditEvent {
	gen := synth.New(org, 3, 7)
	base := time.Now().Add(-time.Hour).UTC()
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		evs[i] = gen.Event(base.Add(time.Duration(i) * time.Millisecond))
		evs[i].Stored = schemas.Persisted{Seq: from + uint64(i) + 1, Time: base.Add(time.Duration(i) * time.Millisecond)}
	}
	return evs
}

func newLogEnv(tb testing.TB, n int) *logEnv {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "audit.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	e := &logEnv{st: st, org: uuid.New()}
	e.key, e.pub, err = tlog.GenerateKey("test-key", time.Now().Add(-24*time.Hour))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	e.qs, err = query.New(cfg, st, allowAll{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	e.app = httpapi.NewApp(nil)
	e.qs.Register(e.app)
	e.add(tb, n)
	return e
}

// add writes n more entries, sequences them and signs a checkpoint of the
// log's new size.
func (e *logEnv) add(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	evs := tlogEvents(e.org, n, uint64(len(e.evs)))
	for i := 0; i < len(evs); i += 5000 {
		if err := e.st.WriteAudit(ctx, evs[i:min(i+5000, len(evs))]); err != nil {
			tb.Fatal(err)
		}
	}
	e.evs = append(e.evs, evs...)
	r, err := sequencer.New(e.st).Sequence(ctx, e.org, auditstore.LogAudit, uint64(len(e.evs)))
	if err != nil {
		tb.Fatal(err)
	}
	e.size = r.Size
	e.checkpoint(tb, r.Size)
}

// checkpoint signs and stores a checkpoint of size leaves.
func (e *logEnv) checkpoint(tb testing.TB, size int64) []byte {
	tb.Helper()
	ctx := context.Background()
	root, err := tlog.TreeHash(ctx, auditstore.LogReader{Store: e.st, Org: e.org, Kind: auditstore.LogAudit}, size)
	if err != nil {
		tb.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	cp := tlog.Checkpoint{Origin: tlog.Origin("test.auditrail", e.org, tlog.KindAudit), Size: size, Root: root, Time: at}
	note, err := tlog.Sign(cp, e.key)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.st.SaveCheckpoint(ctx, e.org, auditstore.LogAudit, auditstore.Checkpoint{Size: size, Root: root, Time: at, KeyID: e.pub.KeyID, Note: note}); err != nil {
		tb.Fatal(err)
	}
	return note
}

// keysJSON is the audit_keys answer's data for the env's key.
func (e *logEnv) keysJSON(tb testing.TB) []byte {
	b, err := json.Marshal([]tlog.PublicKey{e.pub})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
