package cpstate

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// openAs mirrors the production control-plane bucket with the NATS
// credentials of role (read-only unless it is the control plane).
func openAs(t *testing.T, ctx context.Context, a *testenv.AuthNATS, role string) *State {
	t.Helper()
	js, err := jetstream.New(a.Connect(t, role))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultStateConfig()
	cfg.ReadOnly = role != natsx.RoleControlPlane
	s, err := OpenState(ctx, js, cfg, nil)
	if err != nil {
		t.Fatalf("%s opens the state: %v", role, err)
	}
	return s
}

// The organizations' witnesses as the two roles see them, each with its
// own NATS credentials: the control plane writes them, and the tlog
// role's read-only mirror follows every change (added, the list replaced,
// removed) without a query per round; the control plane reads what the
// tlog role writes in its bucket, and nothing before the bucket exists.
func TestWitnessesAcrossRoles(t *testing.T) {
	if DefaultBucket != natsx.ControlPlaneBucket {
		t.Fatal("the state's bucket is not the one the NATS permissions name")
	}
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp := openAs(t, ctx, a, natsx.RoleControlPlane)
	tl := openAs(t, ctx, a, natsx.RoleTLog)
	org, other := uuid.New(), uuid.New()
	key := WitnessesKey(org.String())

	// The tlog bucket does not exist yet: nothing to read, no error.
	if got, err := cp.TLogValues(ctx, "witnesses.operator"); err != nil || len(got) != 0 {
		t.Fatalf("before the tlog bucket: %v %v", got, err)
	}

	w := func(name string) Witness {
		return Witness{ID: uuid.New(), OrgID: org, URL: "https://" + name + ".example", VKey: name + "+01020304+BAAA", Name: name,
			CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	}
	a1, a2 := w("a"), w("b")
	steps := []struct {
		name  string
		write func(rev uint64) Write
		want  []Witness
	}{
		{"added", func(rev uint64) Write { return SetKey(key, OrgWitnesses{Witnesses: []Witness{a1}}, rev) }, []Witness{a1}},
		{"another added", func(rev uint64) Write { return SetKey(key, OrgWitnesses{Witnesses: []Witness{a1, a2}}, rev) }, []Witness{a1, a2}},
		{"the first removed", func(rev uint64) Write { return SetKey(key, OrgWitnesses{Witnesses: []Witness{a2}}, rev) }, []Witness{a2}},
		{"the last removed", func(rev uint64) Write { return DeleteKey(key, rev) }, nil},
	}
	for _, st := range steps {
		_, rev, err := WitnessesOf(cp, org)
		if err != nil {
			t.Fatal(err)
		}
		if err := cp.Commit(ctx, []Write{st.write(rev)}, nil); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		testenv.Eventually(t, 10*time.Second, "the tlog role's mirror: "+st.name, func() bool {
			got, _, err := WitnessesOf(tl, org)
			if err != nil || len(got) != len(st.want) {
				return false
			}
			for i := range got {
				if got[i].ID != st.want[i].ID || got[i].VKey != st.want[i].VKey || got[i].URL != st.want[i].URL || !got[i].CreatedAt.Equal(st.want[i].CreatedAt) {
					return false
				}
			}
			return true
		})
		if err := tl.Fresh(); err != nil {
			t.Fatalf("the tlog role's mirror is not fresh: %v", err)
		}
		if got, _, _ := WitnessesOf(tl, other); len(got) != 0 {
			t.Fatalf("another organization has witnesses: %v", got)
		}
	}
	// A stale revision is a conflict: two instances cannot both add.
	if err := cp.Commit(ctx, []Write{SetKey(key, OrgWitnesses{Witnesses: []Witness{a1}}, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cp.Commit(ctx, []Write{SetKey(key, OrgWitnesses{Witnesses: []Witness{a2}}, 0)}, nil); err == nil {
		t.Fatal("a second creation of the list over the first was accepted")
	}
	// The tlog role cannot write the list.
	if err := tl.Commit(ctx, []Write{SetKey(key, OrgWitnesses{}, 0)}, nil); err == nil {
		t.Fatal("the tlog role's read-only state wrote")
	}

	// What the tlog role writes in its bucket, the control plane reads.
	tjs, _ := jetstream.New(a.Connect(t, natsx.RoleTLog))
	kv, err := tjs.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "witnesses.operator", []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "wstatus.x", []byte(`{"last_cosigned_size":3}`)); err != nil {
		t.Fatal(err)
	}
	got, err := cp.TLogValues(ctx, "witnesses.operator", "wstatus.x", "wstatus.absent")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["witnesses.operator"]) != `[]` || string(got["wstatus.x"]) != `{"last_cosigned_size":3}` {
		t.Fatalf("tlog values: %q", got)
	}
}
