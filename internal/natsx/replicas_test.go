package natsx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// On a 3-server cluster the streams are created with the replicas asked,
// raised and lowered on an existing deployment, and keep their messages.
func TestReplicasOnACluster(t *testing.T) {
	c := testenv.NewNATSCluster(t, 3)
	js, err := jetstream.New(c.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := natsx.DefaultStreamConfig()
	for _, n := range []int{1, 3, 2} {
		cfg.Replicas = n
		if err := natsx.EnsureStreams(ctx, js, cfg); err != nil {
			t.Fatalf("replicas %d: %v", n, err)
		}
		if n == 1 {
			// A stream just placed on a cluster may not answer for a moment
			// (its leader is being elected).
			for {
				_, err := js.Publish(ctx, schemas.EventSubject("org", schemas.KindAudit), []byte("x"))
				if err == nil {
					break
				}
				if !errors.Is(err, jetstream.ErrNoStreamResponse) || ctx.Err() != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		for _, name := range []string{schemas.StreamEvents, schemas.StreamDLQ} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config.Replicas; got != n {
				t.Errorf("%s: %d replicas, want %d", name, got, n)
			}
		}
	}
	// EnsureReplicas on its own: unchanged, then a KV bucket's stream.
	if _, err := natsx.EnsureReplicas(ctx, js, schemas.StreamEvents, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"}); err != nil {
		t.Fatal(err)
	}
	if sc, err := natsx.EnsureReplicas(ctx, js, "KV_b", 3); err != nil || sc.Replicas != 3 {
		t.Fatalf("bucket: %+v %v", sc, err)
	}
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if st.CachedInfo().State.Msgs != 1 {
		t.Errorf("the stream holds %d messages after its replicas changed, want 1", st.CachedInfo().State.Msgs)
	}
}

// Replicas outside 1..5 are refused before any request; a missing stream
// and a single server asked for 3 replicas are errors.
func TestEnsureReplicasErrors(t *testing.T) {
	_, nc := testenv.NATSWithoutStreams(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for _, n := range []int{0, 6, -1} {
		if _, err := natsx.EnsureReplicas(ctx, js, schemas.StreamEvents, n); !errors.Is(err, natsx.ErrInvalidOption) {
			t.Errorf("replicas %d: %v", n, err)
		}
		cfg := natsx.DefaultStreamConfig()
		cfg.Replicas = n
		if err := natsx.EnsureStreams(ctx, js, cfg); !errors.Is(err, natsx.ErrInvalidOption) {
			t.Errorf("streams with replicas %d: %v", n, err)
		}
	}
	if _, err := natsx.EnsureReplicas(ctx, js, "NOPE", 1); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("missing stream: %v", err)
	}
	cfg := natsx.DefaultStreamConfig()
	cfg.Replicas = 3
	if err := natsx.EnsureStreams(ctx, js, cfg); err == nil {
		t.Error("3 replicas on one server: no error")
	}
}
