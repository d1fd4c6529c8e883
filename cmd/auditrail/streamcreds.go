package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/natsx"
)

// envNATSStreamKey is the environment twin of --nats-stream-key.
const envNATSStreamKey = "AUDITRAIL_NATS_STREAM_KEY_FILE"

// addStreamKeyFlag adds --nats-stream-key, the file of the key that signs
// stream credentials (the seed of the AUDITRAIL_SIEM account).
func addStreamKeyFlag(fs *cli.Flags) *string {
	return fs.String("nats-stream-key", envNATSStreamKey, "", "file of the key that signs stream credentials (KEYS/siem.nk, written by auditrail nats-setup; never printed); without it the stream_credentials routes answer 503")
}

// streamSweepEvery is how often the consumers of revoked and expired
// stream credentials are looked for.
const streamSweepEvery = time.Minute

// useStreamCredentials enables the stream-credential routes of admin:
// signer signs the credentials, nc (the controlplane role's connection)
// creates and deletes their consumers and serves the credentials' own
// creates and deletes (the proxy); the consumers of revoked and expired
// credentials are deleted until ctx ends.
func useStreamCredentials(ctx context.Context, admin *controlplane.Service, signer *natsx.StreamSigner, nc *nats.Conn, log *slog.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	admin.UseStreamCredentials(natsx.StreamIssuer{Signer: signer, Consumers: natsx.StreamConsumers{JS: js}})
	proxy := &natsx.StreamConsumerProxy{NC: nc, Account: signer.Account(), Creds: admin, Log: log}
	stop, err := proxy.Start()
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		stop()
	}()
	go admin.RunStreamCredentials(ctx, streamSweepEvery)
	return nil
}

// loadStreamCredentials enables them from the key file path, when given.
func loadStreamCredentials(ctx context.Context, admin *controlplane.Service, path string, nc *nats.Conn, log *slog.Logger) error {
	if path == "" {
		return nil
	}
	signer, err := natsx.LoadStreamSigner(path)
	if err != nil {
		return cli.UsageErrorf("--nats-stream-key: %v", err)
	}
	return useStreamCredentials(ctx, admin, signer, nc, log)
}
