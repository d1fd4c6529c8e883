package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpapi"
)

// waitBucket waits until the KV bucket exists (a read-only role cannot
// create it).
func waitBucket(ctx context.Context, w *httpapi.StartWait, nc *nats.Conn, bucket, creator string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return w.Until(ctx, fmt.Sprintf("KV bucket %s (the %s role creates it)", bucket, creator), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.KeyValue(ctx, bucket)
		return err
	})
}

// waitStreams waits until the streams exist (all when names is empty).
func waitStreamsOf(ctx context.Context, w *httpapi.StartWait, nc *nats.Conn, log *slog.Logger, names ...string) error {
	what := "streams AUDITRAIL_EVENTS, AUDITRAIL_DLQ and AUDITRAIL_COMMITS"
	if len(names) == 1 {
		what = "stream " + names[0]
	}
	w.Set(what + " (the controlplane role creates them)")
	defer func() {
		if w.WaitingFor() == what+" (the controlplane role creates them)" {
			w.Set("")
		}
	}()
	return cli.WaitStreams(ctx, nc, log, names...)
}
