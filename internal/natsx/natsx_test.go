package natsx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func TestEnsureStreamsIdempotentAndUpdates(t *testing.T) {
	_, nc := testenv.NATSWithoutStreams(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	sc := natsx.DefaultStreamConfig()
	for i := 0; i < 2; i++ {
		if err := natsx.EnsureStreams(ctx, js, sc); err != nil {
			t.Fatalf("ensure #%d: %v", i, err)
		}
	}
	s, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	if info.Config.Duplicates < 10*time.Minute || info.Config.Subjects[0] != "auditrail.events.>" || info.Config.Storage != jetstream.FileStorage {
		t.Fatalf("events stream config %+v", info.Config)
	}
	if _, err := js.Stream(ctx, schemas.StreamDLQ); err != nil {
		t.Fatal(err)
	}
	// Changing the retention updates the existing stream.
	sc.MaxAge = 48 * time.Hour
	if err := natsx.EnsureStreams(ctx, js, sc); err != nil {
		t.Fatal(err)
	}
	info, _ = s.Info(ctx)
	if info.Config.MaxAge != 48*time.Hour {
		t.Fatalf("max age not updated: %s", info.Config.MaxAge)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []natsx.StreamConfig{
		{Duplicates: time.Minute, Replicas: 1},
		{Duplicates: 20 * time.Minute, Replicas: 0},
		{Duplicates: 20 * time.Minute, Replicas: 1, MaxAge: time.Minute},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, natsx.ErrInvalidOption) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []natsx.ServerConfig{{Listen: "nohostport", StoreDir: "x", ReadyTimeout: time.Second}, {Listen: "127.0.0.1:0", ReadyTimeout: time.Second}} {
		if err := c.Validate(); !errors.Is(err, natsx.ErrInvalidOption) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).reloadOCSP"))
}
