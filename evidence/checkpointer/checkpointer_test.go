package checkpointer

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func bucket(t *testing.T) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	_, _, js := testenv.NATS(t)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "auditrail_tlog"})
	if err != nil {
		t.Fatal(err)
	}
	return js, kv
}

func sealer(t *testing.T, fill byte) *cpstate.Sealer {
	t.Helper()
	s, err := cpstate.NewSealer(bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func keyring(t *testing.T, kv jetstream.KeyValue, s Sealer, clk *clock, log *slog.Logger) *Keyring {
	t.Helper()
	k, err := NewKeyring(kv, s, DefaultKeyringConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		k.now = clk.now
	}
	return k
}

// The first key is made on first use, kept while current, rotated after
// KeyLifetime with the old key's not_after = the new key's not_before;
// the list shows both; a keyring without a sealer only lists.
func TestKeyringFirstKeyAndRotation(t *testing.T) {
	_, kv := bucket(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	k := keyring(t, kv, sealer(t, 1), clk, nil)
	reader := keyring(t, kv, nil, nil, nil)
	if keys, err := reader.PublicKeys(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("PublicKeys of an empty bucket = %v, %v", keys, err)
	}
	if _, _, _, err := reader.Current(ctx); !errors.Is(err, ErrNoSealer) {
		t.Fatalf("Current without a sealer = %v, want ErrNoSealer", err)
	}
	p1, pub1, at, err := k.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.KeyID() != pub1.KeyID || pub1.NotAfter != nil || !pub1.NotBefore.Equal(clk.now()) || !at.Equal(clk.now()) {
		t.Fatalf("first key %+v at %s", pub1, at)
	}
	clk.add(29 * 24 * time.Hour)
	if _, pub, _, err := k.Current(ctx); err != nil || pub.KeyID != pub1.KeyID {
		t.Fatalf("before its lifetime, Current = %v, %v; want %s", pub.KeyID, err, pub1.KeyID)
	}
	// Another process (the same sealer keys) opens the same key.
	if p, _, _, err := keyring(t, kv, sealer(t, 1), clk, nil).Current(ctx); err != nil || p.KeyID() != pub1.KeyID {
		t.Fatalf("another keyring's Current = %v, %v", p, err)
	}
	clk.add(24 * time.Hour)
	_, pub2, at2, err := k.Current(ctx)
	if err != nil || pub2.KeyID == pub1.KeyID {
		t.Fatalf("after the lifetime, Current = %v, %v; want a new key", pub2.KeyID, err)
	}
	keys, err := reader.PublicKeys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("PublicKeys = %v, %v", keys, err)
	}
	if keys[0].KeyID != pub1.KeyID || keys[0].NotAfter == nil || !keys[0].NotAfter.Equal(pub2.NotBefore) || keys[1].KeyID != pub2.KeyID || keys[1].NotAfter != nil {
		t.Fatalf("after a rotation: %+v", keys)
	}
	ks, err := tlog.NewKeySet(keys...)
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint signed now verifies with the listed keys.
	priv, _, _, _ := k.Current(ctx)
	msg, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("auditrail", uuid.New(), tlog.KindAudit), Size: 1, Time: at2}, priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, by, err := tlog.Open(msg, ks); err != nil || by.KeyID != pub2.KeyID {
		t.Fatalf("Open = %v, %v", by.KeyID, err)
	}
}

// The private key is sealed at rest, bound to its KV key, never in the
// clear in the bucket, and never in the logs; a sealer with other keys
// cannot open it.
func TestKeyringSealsPrivateKey(t *testing.T) {
	_, kv := bucket(t)
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	k := keyring(t, kv, sealer(t, 1), nil, log)
	priv, pub, _, err := k.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := priv.Marshal()
	// PRIVATE+KEY+name+hash+base64: the base64 may itself hold '+', so it
	// is everything after the fourth '+', never after the last one.
	parts := bytes.SplitN(raw, []byte("+"), 5)
	if len(parts) != 5 || len(parts[4]) < 40 {
		t.Fatalf("unexpected private key encoding (%d parts)", len(parts))
	}
	secret := parts[4]
	e, err := kv.Get(ctx, keyPrefix+pub.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range []struct {
		name string
		b    []byte
	}{{"the bucket", e.Value()}, {"the logs", logs.Bytes()}} {
		if bytes.Contains(where.b, secret) || bytes.Contains(where.b, []byte(base64.StdEncoding.EncodeToString(raw))) {
			t.Errorf("%s hold the private key", where.name)
		}
	}
	if !strings.Contains(logs.String(), pub.KeyID) {
		t.Errorf("the new key is not logged by its key_id: %s", logs.String())
	}
	// Another sealer key: refused.
	k.opened = map[string]tlog.PrivateKey{}
	if _, _, _, err := keyring(t, kv, sealer(t, 2), nil, nil).Current(ctx); !errors.Is(err, cpstate.ErrSealed) {
		t.Errorf("Current with other secrets keys = %v, want ErrSealed", err)
	}
	// The sealed bytes moved under another key id: refused (associated data).
	r, err := decodeKey(keyPrefix+pub.KeyID, e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sealer(t, 1).Open(keyPrefix+"00000000", r.Sealed); !errors.Is(err, cpstate.ErrSealed) {
		t.Errorf("sealed key opened under another KV key: %v", err)
	}
}

// Leaders racing on an empty bucket, then on a due rotation, make one
// current key each time, and leave no other key record behind.
func TestKeyringRaceOneCurrentKey(t *testing.T) {
	_, kv := bucket(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const n = 6
	rings := make([]*Keyring, n)
	for i := range rings {
		rings[i] = keyring(t, kv, sealer(t, 1), clk, nil)
	}
	race := func() string {
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range rings {
			wg.Add(1)
			go func() { defer wg.Done(); _, pub, _, err := rings[i].Current(ctx); ids[i], errs[i] = pub.KeyID, err }()
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil || ids[i] != ids[0] {
				t.Fatalf("leaders got keys %v, errors %v", ids, errs)
			}
		}
		return ids[0]
	}
	first := race()
	clk.add(31 * 24 * time.Hour)
	second := race()
	if first == second {
		t.Fatal("no rotation")
	}
	// Tidying happens on the next use; then exactly two key records.
	if _, _, _, err := rings[0].Current(ctx); err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeysFiltered(ctx, keyPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range lister.Keys() {
		names = append(names, k)
	}
	if len(names) != 2 {
		t.Errorf("key records %v, want 2", names)
	}
	keys, err := rings[0].PublicKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].KeyID != first || keys[1].KeyID != second || keys[1].NotAfter != nil {
		t.Errorf("PublicKeys = %+v, %v", keys, err)
	}
}

// A crash between making a key current and retiring the former one is
// repaired by the next leader; a key record that never became current is
// neither listed nor kept.
func TestKeyringRepairs(t *testing.T) {
	_, kv := bucket(t)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	k := keyring(t, kv, sealer(t, 1), clk, nil)
	_, pub1, _, err := k.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(31 * 24 * time.Hour)
	_, pub2, _, err := k.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Undo the retirement (the crash), and add a loser's orphan.
	e, _ := kv.Get(ctx, keyPrefix+pub1.KeyID)
	r, _ := decodeKey(keyPrefix+pub1.KeyID, e.Value())
	r.NotAfter = nil
	b, _ := r.MarshalJSON()
	if _, err := kv.Put(ctx, keyPrefix+pub1.KeyID, b); err != nil {
		t.Fatal(err)
	}
	_, orphan, _ := tlog.GenerateKey("auditrail", clk.now())
	ob, _ := keyRecord{PublicKey: orphan, Sealed: []byte{1}}.MarshalJSON()
	if _, err := kv.Put(ctx, keyPrefix+orphan.KeyID, ob); err != nil {
		t.Fatal(err)
	}
	if keys, _ := k.PublicKeys(ctx); len(keys) != 1 || keys[0].KeyID != pub2.KeyID {
		t.Fatalf("listed before the repair: %+v", keys)
	}
	// Within orphanGrace the record may be another leader's rotation in
	// flight: kept; past it, removed.
	if _, _, _, err := k.Current(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, keyPrefix+orphan.KeyID); err != nil {
		t.Fatalf("a fresh record newer than the current key was removed: %v", err)
	}
	clk.add(2 * orphanGrace)
	if _, _, _, err := k.Current(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := k.PublicKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].NotAfter == nil || !keys[0].NotAfter.Equal(pub2.NotBefore) {
		t.Fatalf("after the repair: %+v, %v", keys, err)
	}
	if _, err := kv.Get(ctx, keyPrefix+orphan.KeyID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("orphan key record kept: %v", err)
	}
}

type fixture struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	store *sqlite.Store
	clk   *clock
	obs   *countObserver
}

type countObserver struct {
	mu                sync.Mutex
	signed, pubFailed map[string]int
	last              map[string]time.Time
}

func (o *countObserver) CheckpointSigned(k string) { o.mu.Lock(); o.signed[k]++; o.mu.Unlock() }
func (o *countObserver) CheckpointPublishFailed(k string) {
	o.mu.Lock()
	o.pubFailed[k]++
	o.mu.Unlock()
}
func (o *countObserver) CheckpointRound(k string, t time.Time) {
	o.mu.Lock()
	o.last[k] = t
	o.mu.Unlock()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	js, kv := bucket(t)
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{js: js, kv: kv, store: s, clk: &clock{t: time.Now().UTC().Truncate(time.Millisecond)},
		obs: &countObserver{signed: map[string]int{}, pubFailed: map[string]int{}, last: map[string]time.Time{}}}
}

func (f *fixture) checkpointer(t *testing.T, instance string, pub Publisher) *Checkpointer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Interval = instance, time.Second, 200*time.Millisecond
	if pub == nil {
		pub = f.js
	}
	c, err := New(cfg, Deps{Store: f.store, KV: f.kv, JS: pub, Sealer: sealer(t, 1), Observer: f.obs})
	if err != nil {
		t.Fatal(err)
	}
	c.now, c.keys.now = f.clk.now, f.clk.now
	return c
}

func (f *fixture) grow(t *testing.T, org uuid.UUID, kind auditstore.LogKind, m *storetest.LogModel, n int) {
	t.Helper()
	leaves, hashes := m.Add(t, n)
	if err := f.store.AppendLog(context.Background(), org, kind, leaves, hashes); err != nil {
		t.Fatal(err)
	}
}

// published returns the checkpoints in the stream for org, oldest first.
func (f *fixture) published(t *testing.T, org uuid.UUID) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	st, err := f.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subj := schemas.EventSubject(org.String(), schemas.KindCheckpoint)
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[subj])
	var out []*jetstream.RawStreamMsg
	for len(out) < n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		md, _ := m.Metadata()
		out = append(out, &jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: md.Sequence.Stream, Header: m.Headers(), Data: m.Data()})
	}
	return out
}

func (f *fixture) keySet(t *testing.T, c *Checkpointer) tlog.KeySet {
	t.Helper()
	keys, err := c.Keyring().PublicKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ks, err := tlog.NewKeySet(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// A round signs every log that grew, one query per kind; the checkpoint
// is stored and published on the org's subject with its headers, its
// root is the tree's, it verifies with the listed keys; a log that did
// not grow is signed again only once Quiet has passed.
func TestCheckpointerRounds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.checkpointer(t, "a", nil)
	a, b := uuid.New(), uuid.New()
	ma, mb, mx := storetest.NewLogModel(), storetest.NewLogModel(), storetest.NewLogModel()
	f.grow(t, a, auditstore.LogAudit, ma, 5)
	f.grow(t, b, auditstore.LogAudit, mb, 1)
	f.grow(t, a, auditstore.LogExecutions, mx, 3)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ks := f.keySet(t, c)
	check := func(org uuid.UUID, kind auditstore.LogKind, m *storetest.LogModel, wantMsgs int) tlog.Checkpoint {
		t.Helper()
		msgs := f.published(t, org)
		var mine []*jetstream.RawStreamMsg
		for _, msg := range msgs {
			cp, _, err := tlog.Open(msg.Data, ks)
			if err != nil {
				t.Fatalf("published checkpoint does not open: %v", err)
			}
			if _, _, k, _ := tlog.ParseOrigin(cp.Origin); k == tlogKind(kind) {
				mine = append(mine, msg)
			}
		}
		if len(mine) != wantMsgs {
			t.Fatalf("%s %s: %d checkpoints published, want %d", org, kind, len(mine), wantMsgs)
		}
		msg := mine[len(mine)-1]
		if msg.Header.Get(schemas.HeaderSchema) != schemas.SchemaCheckpointV1 || msg.Header.Get(schemas.HeaderContentType) != "text/plain; charset=utf-8" ||
			msg.Header.Get(schemas.HeaderMsgID) != MsgID(msg.Data) {
			t.Errorf("headers %v", msg.Header)
		}
		cp, _, _ := tlog.Open(msg.Data, ks)
		n := int64(len(m.Leaves))
		if cp.Size != n || cp.Root != m.Root(t, n) || cp.Origin != tlog.Origin("auditrail", org, tlogKind(kind)) {
			t.Errorf("checkpoint %+v; want size %d root %x", cp, n, m.Root(t, n))
		}
		stored, ok, err := f.store.LatestCheckpoint(ctx, org, kind)
		if err != nil || !ok || !bytes.Equal(stored.Note, msg.Data) {
			t.Errorf("stored checkpoint %q, %v, %v; published %q", stored.Note, ok, err, msg.Data)
		}
		return cp
	}
	check(a, auditstore.LogAudit, ma, 1)
	check(b, auditstore.LogAudit, mb, 1)
	check(a, auditstore.LogExecutions, mx, 1)
	if f.obs.signed["audit_logs"] != 2 || f.obs.signed["tool_executions"] != 1 || f.obs.last["audit_logs"].IsZero() {
		t.Errorf("observer: %+v", f.obs)
	}

	// Nothing grew: nothing signed.
	f.clk.add(time.Minute)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, auditstore.LogAudit, ma, 1)
	// One grew: that one only.
	f.grow(t, b, auditstore.LogAudit, mb, 4)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check(b, auditstore.LogAudit, mb, 2)
	check(a, auditstore.LogAudit, ma, 1)
	// A new leader (state forgotten) reads the stored checkpoints and
	// does not sign again.
	c2 := f.checkpointer(t, "b", nil)
	c2.last = map[logID]signed{}
	if err := c2.Round(ctx); err != nil {
		t.Fatal(err)
	}
	check(a, auditstore.LogAudit, ma, 1)
	// Quiet passed: every log signed again at its size, newer time, and
	// the stored one is the newer.
	f.clk.add(time.Hour)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	cp := check(a, auditstore.LogAudit, ma, 2)
	check(a, auditstore.LogExecutions, mx, 2)
	if !cp.Time.Equal(f.clk.now()) {
		t.Errorf("re-signed checkpoint time %s, want %s", cp.Time, f.clk.now())
	}
}

type failingPublisher struct {
	fail bool
	Publisher
}

func (p *failingPublisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if p.fail {
		return nil, errors.New("no responders")
	}
	return p.Publisher.PublishMsg(ctx, m, opts...)
}

// A checkpoint stored but not published is signed and published again on
// the next round; the failure is counted.
func TestCheckpointerPublishFailure(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pub := &failingPublisher{fail: true, Publisher: f.js}
	c := f.checkpointer(t, "a", pub)
	org, m := uuid.New(), storetest.NewLogModel()
	f.grow(t, org, auditstore.LogAudit, m, 2)
	if err := c.Round(ctx); err == nil {
		t.Fatal("round with a failing publisher: no error")
	}
	if f.obs.pubFailed["audit_logs"] != 1 {
		t.Errorf("publish failures %v", f.obs.pubFailed)
	}
	if _, ok, _ := f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit); !ok {
		t.Error("checkpoint not stored")
	}
	pub.fail = false
	f.clk.add(time.Second)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if msgs := f.published(t, org); len(msgs) != 1 {
		t.Fatalf("%d published after the retry, want 1", len(msgs))
	}
}

// Two checkpointers running: one signs (the lease); the checkpoints of a
// log in the stream follow its growth without duplicates.
func TestCheckpointerOneAtATime(t *testing.T) {
	f := newFixture(t)
	f.clk = &clock{t: time.Now()}
	org, m := uuid.New(), storetest.NewLogModel()
	f.grow(t, org, auditstore.LogAudit, m, 3)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		c := f.checkpointer(t, name, nil)
		c.now, c.keys.now = time.Now, time.Now
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	testenv.Eventually(t, 10*time.Second, "a checkpoint", func() bool { return len(f.published(t, org)) >= 1 })
	time.Sleep(time.Second) // several intervals of both
	if n := len(f.published(t, org)); n != 1 {
		t.Fatalf("%d checkpoints of an unchanged log, want 1", n)
	}
	f.grow(t, org, auditstore.LogAudit, m, 2)
	testenv.Eventually(t, 10*time.Second, "a second checkpoint", func() bool { return len(f.published(t, org)) >= 2 })
	time.Sleep(time.Second)
	msgs := f.published(t, org)
	if len(msgs) != 2 {
		t.Fatalf("%d checkpoints after one growth, want 2", len(msgs))
	}
	cp, _, err := tlog.Open(msgs[1].Data, f.keySet(t, f.checkpointer(t, "x", nil)))
	if err != nil || cp.Size != 5 {
		t.Fatalf("second checkpoint %+v, %v", cp, err)
	}
}

// With the tlog role's credentials (as deployed): the checkpointer makes
// its bucket, its key and its lease, and publishes; the query role's
// credentials list the keys (GET /api/v1/audit_keys) and cannot make one.
func TestCheckpointerWithRoleCredentials(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx := context.Background()
	tjs, err := jetstream.New(a.Connect(t, natsx.RoleTLog))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := tjs.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	org, m := uuid.New(), storetest.NewLogModel()
	leaves, hashes := m.Add(t, 4)
	if err := s.AppendLog(ctx, org, auditstore.LogAudit, leaves, hashes); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Interval = "a", time.Second, 100*time.Millisecond
	c, err := New(cfg, Deps{Store: s, KV: kv, JS: tjs, Sealer: sealer(t, 1)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 10*time.Second, "a checkpoint with the tlog role's credentials", func() bool {
		_, ok, _ := s.LatestCheckpoint(ctx, org, auditstore.LogAudit)
		return ok
	})
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	st, _ := admin.Stream(ctx, schemas.StreamEvents)
	msg, err := st.GetLastMsgForSubject(ctx, schemas.EventSubject(org.String(), schemas.KindCheckpoint))
	if err != nil {
		t.Fatalf("checkpoint not published: %v", err)
	}
	qjs, _ := jetstream.New(a.Connect(t, natsx.RoleQuery))
	qkv, err := qjs.KeyValue(ctx, natsx.TLogBucket)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := NewKeyring(qkv, nil, DefaultKeyringConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := reader.PublicKeys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("query lists %v, %v", keys, err)
	}
	ks, _ := tlog.NewKeySet(keys...)
	if cp, _, err := tlog.Open(msg.Data, ks); err != nil || cp.Size != 4 || cp.Root != m.Root(t, 4) {
		t.Fatalf("published checkpoint %+v, %v", cp, err)
	}
	// The query role cannot make a key, even with the sealer.
	qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
	defer qcancel()
	if _, err := qkv.Put(qctx, keyPrefix+"00000000", []byte("{}")); err == nil {
		t.Fatal("the query role wrote the tlog bucket")
	}
}

var _ Observer = (*metrics.TLogObserver)(nil)
var _ WitnessObserver = (*metrics.TLogObserver)(nil)

// Across a rotation each checkpoint is signed by the key current at its
// time: the one before by the old key, the one after by the new, and both
// open with the listed keys (tlog.Open checks the key's validity at the
// checkpoint's time).
func TestCheckpointerSignsWithCurrentKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.checkpointer(t, "a", nil)
	org, m := uuid.New(), storetest.NewLogModel()
	f.grow(t, org, auditstore.LogAudit, m, 2)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.add(31 * 24 * time.Hour)
	f.grow(t, org, auditstore.LogAudit, m, 2)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	ks := f.keySet(t, c)
	if n := len(ks.Keys()); n != 2 {
		t.Fatalf("%d keys after a rotation, want 2", n)
	}
	msgs := f.published(t, org)
	if len(msgs) != 2 {
		t.Fatalf("%d checkpoints, want 2", len(msgs))
	}
	var by []string
	for i, msg := range msgs {
		cp, key, err := tlog.Open(msg.Data, ks)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if cp.Size != int64(2*(i+1)) {
			t.Errorf("checkpoint %d: size %d", i, cp.Size)
		}
		by = append(by, key.KeyID)
	}
	if by[0] == by[1] || by[0] != ks.Keys()[0].KeyID || by[1] != ks.Keys()[1].KeyID {
		t.Errorf("signed by %v; keys %v", by, ks.Keys())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"defaults with an instance", func(*Config) {}, true},
		{"no instance", func(c *Config) { c.Instance = "" }, false},
		{"short lease", func(c *Config) { c.LeaseTTL = time.Millisecond }, false},
		{"no interval", func(c *Config) { c.Interval = 0 }, false},
		{"quiet under the interval", func(c *Config) { c.Quiet = time.Second }, false},
		{"prefix with a space", func(c *Config) { c.Prefix = "audit rail" }, false},
		{"prefix with a plus", func(c *Config) { c.Prefix = "a+b" }, false},
		{"empty prefix", func(c *Config) { c.Prefix = "" }, false},
		{"host prefix", func(c *Config) { c.Prefix = "audit.example.com" }, true},
		{"key name with a space", func(c *Config) { c.Keyring.Name = "a b" }, false},
		{"short key lifetime", func(c *Config) { c.Keyring.KeyLifetime = time.Second }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Instance = "a"
			tc.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// decodeKey reads what the bucket holds: it never panics, and what it
// accepts is a key whose fields check out under its own KV key.
func FuzzDecodeKey(f *testing.F) {
	_, pub, _ := tlog.GenerateKey("auditrail", time.Unix(1_800_000_000, 0))
	good, _ := keyRecord{PublicKey: pub, Sealed: []byte{1, 2, 3}}.MarshalJSON()
	f.Add(keyPrefix+pub.KeyID, good)
	f.Add("key.x", []byte(`{"key_id":"x"}`))
	f.Add("key.", []byte(`null`))
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		r, err := decodeKey(name, b)
		if err != nil {
			return
		}
		if name != keyPrefix+r.KeyID {
			t.Fatalf("accepted %s under %s", r.KeyID, name)
		}
		if _, err := r.Verifier(); err != nil {
			t.Fatalf("accepted a key that does not check out: %v", err)
		}
	})
}

// A log smaller than its last checkpoint (a store rolled back) is not
// signed at the smaller size; a keyring that cannot open the key (other
// secrets keys) fails the round once, signs nothing, and says why.
func TestCheckpointerRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.checkpointer(t, "a", nil)
	a, b := uuid.New(), uuid.New()
	ma, mb := storetest.NewLogModel(), storetest.NewLogModel()
	f.grow(t, a, auditstore.LogAudit, ma, 3)
	f.grow(t, b, auditstore.LogAudit, mb, 3)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	c.last[logID{a, auditstore.LogAudit}] = signed{size: 10, at: f.clk.now()}
	f.clk.add(2 * time.Hour)
	if err := c.Round(ctx); !errors.Is(err, ErrLogShrank) {
		t.Fatalf("round over a shrunk log = %v, want ErrLogShrank", err)
	}
	if n := len(f.published(t, a)); n != 1 {
		t.Errorf("%d checkpoints of the shrunk log, want 1", n)
	}
	if n := len(f.published(t, b)); n != 2 {
		t.Errorf("%d checkpoints of the other log, want 2 (hourly)", n)
	}

	other, err := New(c.cfg, Deps{Store: f.store, KV: f.kv, JS: f.js, Sealer: sealer(t, 9)})
	if err != nil {
		t.Fatal(err)
	}
	f.grow(t, a, auditstore.LogAudit, ma, 8)
	f.grow(t, b, auditstore.LogAudit, mb, 1)
	err = other.Round(ctx)
	if !errors.Is(err, cpstate.ErrSealed) || strings.Count(err.Error(), "org ") != 0 {
		t.Fatalf("round without the key = %v, want one ErrSealed", err)
	}
	if n := len(f.published(t, b)); n != 2 {
		t.Errorf("signed without the key: %d checkpoints", n)
	}
}

// The leader makes its signing key as it starts, before any log has a
// checkpoint to sign: a verifier saves the public keys first (the quick
// start does), and they must already be listed.
func TestLeaderMakesItsKeyAtOnce(t *testing.T) {
	f := newFixture(t)
	c := f.checkpointer(t, "a", nil)
	c.now, c.keys.now = time.Now, time.Now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var n int
	testenv.Eventually(t, 10*time.Second, func() string { return fmt.Sprintf("%d public keys listed, want 1", n) }, func() bool {
		keys, err := c.Keyring().PublicKeys(context.Background())
		n = len(keys)
		return err == nil && n == 1
	})
}

// savesCounter counts the checkpointer's writes of checkpoints.
type savesCounter struct {
	*sqlite.Store
	mu        sync.Mutex
	many, one int
}

func (s *savesCounter) SaveCheckpoints(ctx context.Context, cps []auditstore.LogCheckpoint) []error {
	s.mu.Lock()
	s.many++
	s.mu.Unlock()
	return s.Store.SaveCheckpoints(ctx, cps)
}

func (s *savesCounter) SaveCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, cp auditstore.Checkpoint) error {
	s.mu.Lock()
	s.one++
	s.mu.Unlock()
	return s.Store.SaveCheckpoint(ctx, org, kind, cp)
}

// A round stores the checkpoints of a kind's logs in one write of the
// store (ClickHouse: one part, not one per log), and publishes each.
func TestCheckpointerSavesARoundTogether(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	counter := &savesCounter{Store: f.store}
	cfg := DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Interval = "a", time.Second, 200*time.Millisecond
	c, err := New(cfg, Deps{Store: counter, KV: f.kv, JS: f.js, Sealer: sealer(t, 1), Observer: f.obs})
	if err != nil {
		t.Fatal(err)
	}
	orgs := make([]uuid.UUID, 5)
	for i := range orgs {
		orgs[i] = uuid.New()
		f.grow(t, orgs[i], auditstore.LogAudit, storetest.NewLogModel(), i+1)
	}
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if counter.many != 1 || counter.one != 0 {
		t.Fatalf("%d writes of many checkpoints, %d of one; want 1 and 0", counter.many, counter.one)
	}
	for i, org := range orgs {
		cp, ok, err := f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit)
		if err != nil || !ok || cp.Size != int64(i+1) {
			t.Fatalf("org %d: %+v, %v, %v", i, cp, ok, err)
		}
		if n := len(f.published(t, org)); n != 1 {
			t.Fatalf("org %d: %d checkpoints published", i, n)
		}
	}
}

// readCounting counts the reads of the log's hashes from the store.
type readCounting struct {
	*sqlite.Store
	mu    sync.Mutex
	reads int
}

func (r *readCounting) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	r.mu.Lock()
	r.reads++
	r.mu.Unlock()
	return r.Store.ReadLogHashes(ctx, org, kind, indexes)
}

// modelKept keeps a model's hashes at one size, as the sequencer keeps the
// roots of the complete subtrees of the log it appended to; wrong, it
// keeps another hash in place of one.
type modelKept struct {
	m     *storetest.LogModel
	size  int64
	wrong bool
}

func (k *modelKept) KeptHashes(_ uuid.UUID, _ auditstore.LogKind, size int64) map[int64]sumtlog.Hash {
	if size != k.size {
		return nil
	}
	out := map[int64]sumtlog.Hash{}
	_, _ = sumtlog.TreeHash(size, sumtlog.HashReaderFunc(func(idx []int64) ([]sumtlog.Hash, error) {
		hs := make([]sumtlog.Hash, len(idx))
		for i, x := range idx {
			hs[i] = k.m.Hashes[x]
			if k.wrong {
				hs[i][0] ^= 1
			}
			out[x] = hs[i]
		}
		return hs, nil
	}))
	return out
}

// TestCheckpointerTakesKeptHashes: with the sequencer's hashes at hand
// (Deps.Kept) the checkpointer signs a log's root without reading a hash
// from the store (a read per log and round was a third of the reads of
// the ClickHouse server under a steady load), and reads them where it
// keeps none at the log's size; a kept hash that is wrong gives a root the
// store refuses: nothing is signed.
func TestCheckpointerTakesKeptHashes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	store := &readCounting{Store: f.store}
	org := uuid.New()
	m := storetest.NewLogModel()
	f.grow(t, org, auditstore.LogAudit, m, 13)
	kept := &modelKept{m: m, size: 13}
	newCP := func(instance string) *Checkpointer {
		cfg := DefaultConfig()
		cfg.Instance, cfg.LeaseTTL, cfg.Interval = instance, time.Second, 200*time.Millisecond
		c, err := New(cfg, Deps{Store: store, KV: f.kv, JS: f.js, Sealer: sealer(t, 1), Observer: f.obs, Kept: kept})
		if err != nil {
			t.Fatal(err)
		}
		c.now, c.keys.now = f.clk.now, f.clk.now
		return c
	}
	c := newCP("a")
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit)
	if err != nil || !ok || cp.Size != 13 || cp.Root != m.Root(t, 13) {
		t.Fatalf("checkpoint %+v, %v, %v; want size 13 and the model's root", cp, ok, err)
	}
	if store.reads != 0 {
		t.Fatalf("%d reads of the log's hashes with every one kept", store.reads)
	}
	// Grown past what is kept: read from the store.
	f.grow(t, org, auditstore.LogAudit, m, 4)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ = f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit); cp.Size != 17 || cp.Root != m.Root(t, 17) || store.reads == 0 {
		t.Fatalf("checkpoint of size %d after the log grew, %d reads; want 17 and a read", cp.Size, store.reads)
	}
	// A wrong kept hash: the store refuses the root, nothing is signed.
	f.grow(t, org, auditstore.LogAudit, m, 2)
	kept.size, kept.wrong = 19, true
	_ = c.Round(ctx)
	if cp, _, _ = f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit); cp.Size != 17 {
		t.Fatalf("a root from a wrong hash was stored: size %d", cp.Size)
	}
}

// headsCounting counts the reads of every log's head; failSaves makes
// the saves of checkpoints fail.
type headsCounting struct {
	*sqlite.Store
	mu        sync.Mutex
	heads     int
	failSaves bool
}

func (h *headsCounting) SaveCheckpoints(ctx context.Context, cps []auditstore.LogCheckpoint) []error {
	h.mu.Lock()
	fail := h.failSaves
	h.mu.Unlock()
	if fail {
		errs := make([]error, len(cps))
		for i := range errs {
			errs[i] = errors.New("the store is down")
		}
		return errs
	}
	return h.Store.SaveCheckpoints(ctx, cps)
}

func (h *headsCounting) LogHeads(ctx context.Context, kind auditstore.LogKind) (map[uuid.UUID]int64, error) {
	h.mu.Lock()
	h.heads++
	h.mu.Unlock()
	return h.Store.LogHeads(ctx, kind)
}

func (h *headsCounting) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heads
}

// grownLogs is a sequencer of the same process, as the checkpointer sees
// it: the logs that grew through it, its epoch and whether it leads.
type grownLogs struct {
	mu      sync.Mutex
	sizes   map[auditstore.LogKind]map[uuid.UUID]int64
	epoch   uint64
	leading bool
}

func (g *grownLogs) Grown(kind auditstore.LogKind) (map[uuid.UUID]int64, uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sizes[kind]
	delete(g.sizes, kind)
	return s, g.epoch, g.leading
}

func (g *grownLogs) set(f func(g *grownLogs)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// Told of the logs that grew through its process's sequencer, a
// checkpointer signs them without reading every head; it reads every head
// when the sequencer's lead changed (another instance may have appended),
// while it does not lead, after a round that left a log unsigned, and at
// least every FullHeadsEvery.
func TestCheckpointerLooksAtGrownLogs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	store := &headsCounting{Store: f.store}
	g := &grownLogs{epoch: 1, leading: true}
	cfg := DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Interval = "a", time.Second, 200*time.Millisecond
	c, err := New(cfg, Deps{Store: store, KV: f.kv, JS: f.js, Sealer: sealer(t, 1), Observer: f.obs, Grown: g})
	if err != nil {
		t.Fatal(err)
	}
	c.now, c.keys.now = f.clk.now, f.clk.now
	a, b := uuid.New(), uuid.New()
	ma, mb := storetest.NewLogModel(), storetest.NewLogModel()
	f.grow(t, a, auditstore.LogAudit, ma, 5)
	f.grow(t, b, auditstore.LogAudit, mb, 5)
	round := func(what string, reads int, want map[uuid.UUID]int64) {
		t.Helper()
		f.clk.add(time.Second)
		if err := c.Round(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := store.count(); got != reads {
			t.Fatalf("%s: %d reads of every head in all, want %d", what, got, reads)
		}
		for org, size := range want {
			if cp, ok, err := f.store.LatestCheckpoint(ctx, org, auditstore.LogAudit); err != nil || !ok || cp.Size != size {
				t.Fatalf("%s: checkpoint of %s: %+v, %v, %v; want size %d", what, org, cp, ok, err, size)
			}
		}
	}
	grew := func(org uuid.UUID, size int64) {
		g.set(func(g *grownLogs) {
			if g.sizes == nil {
				g.sizes = map[auditstore.LogKind]map[uuid.UUID]int64{}
			}
			if g.sizes[auditstore.LogAudit] == nil {
				g.sizes[auditstore.LogAudit] = map[uuid.UUID]int64{}
			}
			g.sizes[auditstore.LogAudit][org] = size
		})
	}
	round("first", 2, map[uuid.UUID]int64{a: 5, b: 5}) // both kinds read
	f.grow(t, a, auditstore.LogAudit, ma, 3)
	grew(a, 8)
	round("a grew through the sequencer", 2, map[uuid.UUID]int64{a: 8, b: 5})
	round("nothing grew", 2, map[uuid.UUID]int64{a: 8, b: 5})
	// b grows through another instance: this sequencer's lead ended and
	// began again.
	f.grow(t, b, auditstore.LogAudit, mb, 2)
	g.set(func(g *grownLogs) { g.epoch += 2 })
	round("another lead", 4, map[uuid.UUID]int64{a: 8, b: 7})
	round("the same lead", 4, nil)
	g.set(func(g *grownLogs) { g.leading = false; g.epoch++ })
	f.grow(t, a, auditstore.LogAudit, ma, 1)
	round("not leading", 6, map[uuid.UUID]int64{a: 9})
	round("still not leading", 8, nil)
	g.set(func(g *grownLogs) { g.leading = true; g.epoch++ })
	round("leading again", 10, nil)
	round("then", 10, nil)
	// b grows behind everyone's back: found at the next full read.
	f.grow(t, b, auditstore.LogAudit, mb, 1)
	round("a minute not yet over", 10, map[uuid.UUID]int64{b: 7})
	f.clk.add(FullHeadsEvery)
	round("a minute later", 12, map[uuid.UUID]int64{b: 8})
	// A round that leaves a log unsigned reads every head of its kind at
	// the next.
	f.grow(t, a, auditstore.LogAudit, ma, 2)
	grew(a, 11)
	store.mu.Lock()
	store.failSaves = true
	store.mu.Unlock()
	f.clk.add(time.Second)
	if err := c.Round(ctx); err == nil {
		t.Fatal("a round whose saves failed succeeded")
	}
	store.mu.Lock()
	store.failSaves = false
	store.mu.Unlock()
	round("after a failed round", 13, map[uuid.UUID]int64{a: 11, b: 8})
	round("then", 13, nil)
}
