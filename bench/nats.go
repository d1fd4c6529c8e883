package bench

import (
	"context"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/producers"
)

// benchNATS is an embedded NATS server with JetStream and the event
// streams, and a connection to it.
type benchNATS struct {
	ns *server.Server
	nc *nats.Conn
	js jetstream.JetStream
}

// startNATS starts an embedded NATS server on a free port with its
// JetStream store in storeDir, connects to it and makes the event streams.
func startNATS(ctx context.Context, storeDir string) (_ *benchNATS, err error) {
	scfg := natsx.DefaultServerConfig()
	scfg.Listen, scfg.StoreDir = "127.0.0.1:0", storeDir
	b := &benchNATS{}
	if b.ns, err = natsx.StartServer(scfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.nc, err = nats.Connect(b.ns.ClientURL()); err != nil {
		return nil, err
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		return nil, err
	}
	if err := natsx.EnsureStreams(ctx, b.js, natsx.DefaultStreamConfig()); err != nil {
		return nil, err
	}
	return b, nil
}

// close closes the connection and shuts the server down.
func (b *benchNATS) close() {
	if b.nc != nil {
		b.nc.Close()
	}
	b.ns.Shutdown()
}

// publishHalves publishes msgs from two goroutines, a half each (the
// stream's order is not what the benchmarks measure).
func publishHalves(ctx context.Context, pub *producers.Publisher, msgs []*nats.Msg) error {
	n := len(msgs)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, part := range [][]*nats.Msg{msgs[:n/2], msgs[n/2:]} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- pub.PublishMsgs(ctx, part) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
