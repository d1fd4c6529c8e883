package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// The organizations' witnesses are called through the process's egress
// guard, as hook servers and destinations: the tlog role reaches public
// addresses only, dev loopback too, --allow-private-egress everything; the
// client dials through it, so that a witness on loopback (also by a name,
// localhost, that is no address literal: checked when dialled) is refused
// to the tlog role and reached in dev.
func TestOrgWitnessEgress(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "unknown log", http.StatusForbidden)
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	vkey := witnessKeyOf(t)
	for _, tt := range []struct {
		name              string
		allowPrivate, dev bool
		reached           bool
	}{
		{"tlog role", false, false, false},
		{"dev", false, true, true},
		{"dev --allow-private-egress", true, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			guard, err := newEgress(tt.allowPrivate, tt.dev, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			c := orgWitnessClient(guard)
			for _, u := range []string{srv.URL, "http://localhost" + port} {
				w, err := witness.New(u, vkey)
				if err != nil {
					t.Fatal(err)
				}
				before := hits.Load()
				_, err = c.AddCheckpoint(context.Background(), w, 0, 1, nil, []byte("origin\n1\nAAAA\n\n— log sig\n"))
				var refused *egress.RefusedError
				switch {
				case tt.reached && (!errors.Is(err, witness.ErrRefused) || hits.Load() != before+1):
					t.Errorf("%s: not reached: %v", u, err)
				case !tt.reached && (!errors.As(err, &refused) || !errors.Is(err, witness.ErrUnavailable) || hits.Load() != before):
					t.Errorf("%s: not refused by the egress guard: %v (hits %d)", u, err, hits.Load()-before)
				}
			}
		})
	}
}

// witnessKeyOf is a valid cosignature/v1 vkey nobody holds.
func witnessKeyOf(t *testing.T) string {
	t.Helper()
	pub := sha256.Sum256([]byte(t.Name()))
	k := tlog.WitnessKey{Name: "witness.example/t", Pub: pub[:]}
	h := sha256.Sum256(append(append([]byte(k.Name), '\n', 0x04), pub[:]...)) // the key hash, as C2SP computes it
	k.Hash = uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])
	if _, err := tlog.ParseWitnessKey(k.String()); err != nil {
		t.Fatal(err)
	}
	return k.String()
}

// The tlog role's reader of the organizations' witnesses, with the tlog
// role's NATS credentials: nothing (an error: operator's witnesses only)
// until the control plane has created its bucket, which it waits for; then
// the witnesses an organization has now, a removed one gone, a malformed
// record skipped.
func TestOrgWitnessesFromTheMirror(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tjs, _ := jetstream.New(a.Connect(t, natsx.RoleTLog))
	ows := &orgWitnesses{log: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() { defer close(done); ows.mirror(ctx, tjs) }()
	defer func() { cancel(); <-done }()
	org := uuid.New()
	if _, err := ows.OrgWitnesses(ctx, org); !errors.Is(err, errNoMirror) {
		t.Fatalf("before the control plane's bucket: %v", err)
	}

	// The control plane starts later and creates its bucket.
	cjs, _ := jetstream.New(a.Connect(t, natsx.RoleControlPlane))
	cp, err := cpstate.OpenState(ctx, cjs, cpstate.DefaultStateConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	vkey := witnessKeyOf(t)
	good := cpstate.Witness{ID: uuid.New(), OrgID: org, URL: "https://witness.example.com", VKey: vkey, Name: "witness.example/t"}
	bad := cpstate.Witness{ID: uuid.New(), OrgID: org, URL: "ftp://witness.example.com", VKey: vkey}
	key := cpstate.WitnessesKey(org.String())
	if err := cp.Commit(ctx, []cpstate.Write{cpstate.SetKey(key, cpstate.OrgWitnesses{Witnesses: []cpstate.Witness{bad, good}}, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the organization's witness through the mirror", func() bool {
		got, err := ows.OrgWitnesses(ctx, org)
		return err == nil && len(got) == 1 && got[0].ID == good.ID.String() && got[0].Witness.URL == good.URL && got[0].Witness.Key.String() == vkey
	})
	if got, err := ows.OrgWitnesses(ctx, uuid.New()); err != nil || len(got) != 0 {
		t.Fatalf("another organization: %v %v", got, err)
	}
	_, rev, _ := cpstate.WitnessesOf(cp, org)
	if err := cp.Commit(ctx, []cpstate.Write{cpstate.DeleteKey(key, rev)}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the witness removed", func() bool {
		got, err := ows.OrgWitnesses(ctx, org)
		return err == nil && len(got) == 0
	})
}
