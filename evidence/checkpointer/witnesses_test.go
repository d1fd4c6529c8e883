package checkpointer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// witnessed is a checkpointer whose checkpoints two litewitness processes
// (torchwood v0.6.1) cosign.
func witnessed(t *testing.T, f *fixture, ws ...*testenv.Litewitness) *Checkpointer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Interval, cfg.WitnessTimeout = "a", time.Second, 200*time.Millisecond, 3*time.Second
	for _, lw := range ws {
		w, err := witness.New(lw.URL, lw.VKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Witnesses = append(cfg.Witnesses, w)
	}
	c, err := New(cfg, Deps{Store: f.store, KV: f.kv, JS: f.js, Sealer: sealer(t, 1), Observer: f.obs})
	if err != nil {
		t.Fatal(err)
	}
	c.now, c.keys.now = f.clk.now, f.clk.now
	return c
}

// cosigners returns the witnesses whose valid cosignatures the log's
// latest stored checkpoint carries, and checks the log's own signature.
func cosigners(t *testing.T, f *fixture, c *Checkpointer, org uuid.UUID, size int64, ws []tlog.WitnessKey) []string {
	t.Helper()
	cp, ok, err := f.store.LatestCheckpoint(context.Background(), org, auditstore.LogAudit)
	if err != nil || !ok || cp.Size != size {
		t.Fatalf("latest checkpoint %d %v %v, want size %d", cp.Size, ok, err, size)
	}
	if _, _, err := tlog.Open(cp.Note, f.keySet(t, c)); err != nil {
		t.Fatalf("the cosigned note no longer opens with the log's key: %v", err)
	}
	got, problems, err := tlog.Cosignatures(cp.Note, ws)
	if err != nil || len(problems) > 0 {
		t.Fatalf("cosignatures: %v %v", problems, err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.Witness.Name)
	}
	return names
}

func TestCheckpointerWitnesses(t *testing.T) {
	a, b := testenv.StartLitewitness(t, "witness.example/a"), testenv.StartLitewitness(t, "witness.example/b")
	f := newFixture(t)
	c := witnessed(t, f, a, b)
	ctx := context.Background()
	_, pub, _, err := c.keys.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := pub.VKey()
	if err != nil {
		t.Fatal(err)
	}
	org := uuid.New()
	origin := tlog.Origin(c.cfg.Prefix, org, tlog.KindAudit)
	a.AddLog(origin, vkey)
	b.AddLog(origin, vkey)
	keys := []tlog.WitnessKey{c.cfg.Witnesses[0].Key, c.cfg.Witnesses[1].Key}
	m := storetest.NewLogModel()

	f.grow(t, org, auditstore.LogAudit, m, 10)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cosigners(t, f, c, org, 10, keys); len(got) != 2 {
		t.Fatalf("cosigned by %v, want both witnesses\n%s\n%s", got, a.Logs(), b.Logs())
	}
	// The stream carries the cosigned note last.
	msgs := f.published(t, org)
	if n, _, _ := tlog.Cosignatures(msgs[len(msgs)-1].Data, keys); len(n) != 2 {
		t.Fatalf("the last published checkpoint has %d cosignatures, want 2", len(n))
	}

	t.Run("a witness down, cosigned later", func(t *testing.T) {
		b.Stop()
		f.grow(t, org, auditstore.LogAudit, m, 300)
		f.clk.add(time.Second)
		if err := c.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if got := cosigners(t, f, c, org, 310, keys); len(got) != 1 || got[0] != "witness.example/a" {
			t.Fatalf("cosigned by %v while b is down, want a", got)
		}
		b.Start()
		f.clk.add(time.Second)
		if err := c.Round(ctx); err != nil { // the log did not grow: b gets the pending one
			t.Fatal(err)
		}
		if got := cosigners(t, f, c, org, 310, keys); len(got) != 2 {
			t.Fatalf("cosigned by %v after b came back, want both", got)
		}
		if b.Size(origin) != 310 {
			t.Fatalf("b knows the log at %d, want 310 (consistency from 10)", b.Size(origin))
		}
		// Its status, as the API reads it from the tlog bucket.
		e, err := f.kv.Get(ctx, WitnessStatusKey(org, "audit_logs", OperatorID(c.cfg.Witnesses[1])))
		if err != nil {
			t.Fatal(err)
		}
		var st WitnessStatus
		if err := json.Unmarshal(e.Value(), &st); err != nil || st.CosignedSize != 310 || st.Error != "" || st.URL != b.URL {
			t.Fatalf("b's status %s (%v)", e.Value(), err)
		}
	})

	t.Run("rolled back behind the product's back", func(t *testing.T) {
		// The store is replaced by another whose log of the organization
		// is shorter (a restored backup), then grows other leaves: the
		// checkpointer signs it (it lost its memory with the lease), and
		// neither witness cosigns.
		other, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "restored.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		f2 := &fixture{js: f.js, kv: f.kv, store: other, clk: f.clk, obs: f.obs}
		c2 := witnessed(t, f2, a, b)
		m2 := storetest.NewLogModel()
		f2.grow(t, org, auditstore.LogAudit, m2, 100)
		f.clk.add(time.Second)
		if err := c2.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if got := cosigners(t, f2, c2, org, 100, keys); len(got) != 0 {
			t.Fatalf("a rolled-back log was cosigned by %v", got)
		}
		f2.grow(t, org, auditstore.LogAudit, m2, 400) // past what the witnesses saw: a fork
		f.clk.add(time.Second)
		if err := c2.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if got := cosigners(t, f2, c2, org, 500, keys); len(got) != 0 {
			t.Fatalf("a forked log was cosigned by %v", got)
		}
		var errs []string
		for _, st := range c2.WitnessStatuses() {
			errs = append(errs, st.Error)
		}
		if len(errs) != 2 || !strings.Contains(errs[0], "422") || !strings.Contains(errs[1], "422") {
			t.Fatalf("witness statuses %q, want both refusing the proof (422)", errs)
		}
		if a.Size(origin) != 310 || b.Size(origin) != 310 {
			t.Fatalf("the witnesses moved: %d %d", a.Size(origin), b.Size(origin))
		}
	})
}

// fakeOrgs lists an organization's witnesses, or fails once told to.
type fakeOrgs struct {
	list []OrgWitness
	fail bool
}

func (f *fakeOrgs) OrgWitnesses(context.Context, uuid.UUID) ([]OrgWitness, error) {
	if f.fail {
		return nil, errors.New("control plane unreadable")
	}
	return f.list, nil
}

// countingClient records the witnesses it is asked to cosign for.
type countingClient struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingClient) AddCheckpoint(_ context.Context, w witness.Witness, _, _ int64, _ []tlog.Hash, _ []byte) (tlog.Cosignature, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[w.Key.Name]++
	return tlog.Cosignature{}, witness.ErrUnavailable
}

// A witness both the operator and the organization name is called once,
// as the operator's; while the organization's list cannot be read, the
// last one read stands in.
func TestOrgWitnessesOnceAndKept(t *testing.T) {
	f := newFixture(t)
	mk := func(name string) witness.Witness {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, err := torchwood.NewCosignatureSigner(name, priv)
		if err != nil {
			t.Fatal(err)
		}
		w, err := witness.New("https://"+strings.ReplaceAll(name, "/", ".")+".example", s.Verifier().String())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	shared, own := mk("shared"), mk("own")
	op, orgc := &countingClient{calls: map[string]int{}}, &countingClient{calls: map[string]int{}}
	orgs := &fakeOrgs{list: []OrgWitness{{ID: "a", Witness: shared}, {ID: "b", Witness: own}}}
	cfg := DefaultConfig()
	cfg.Instance, cfg.Witnesses = "a", []witness.Witness{shared}
	c, err := New(cfg, Deps{Store: f.store, KV: f.kv, JS: f.js, Sealer: sealer(t, 1), Witness: op, OrgWitnesses: orgs, OrgWitness: orgc})
	if err != nil {
		t.Fatal(err)
	}
	c.now, c.keys.now = f.clk.now, f.clk.now
	org, m := uuid.New(), storetest.NewLogModel()
	ctx := context.Background()
	f.grow(t, org, auditstore.LogAudit, m, 3)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if op.calls["shared"] != 1 || orgc.calls["shared"] != 0 || orgc.calls["own"] != 1 {
		t.Fatalf("calls: operator's client %v, organizations' %v", op.calls, orgc.calls)
	}
	orgs.fail = true
	f.grow(t, org, auditstore.LogAudit, m, 2)
	f.clk.add(time.Second)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if orgc.calls["own"] != 2 {
		t.Fatalf("the organization's witness was not called while its list was unreadable: %v", orgc.calls)
	}
	// Removed by the organization: its status goes from the tlog bucket.
	key := WitnessStatusKey(org, "audit_logs", "b")
	if _, err := f.kv.Get(ctx, key); err != nil {
		t.Fatalf("no status of the organization's witness: %v", err)
	}
	orgs.fail, orgs.list = false, orgs.list[:1]
	f.grow(t, org, auditstore.LogAudit, m, 1)
	f.clk.add(time.Second)
	if err := c.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the removed witness's status stayed: %v", err)
	}
}
