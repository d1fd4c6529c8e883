package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
)

// DeliverResult holds the timings of the delivery benchmark.
type DeliverResult struct {
	Events  int
	Publish time.Duration // producers.Publisher putting the events on the stream
	Deliver time.Duration // one destination: consume, encode, sign, POST, verify, ack, until the receiver has them all
	Posts   int64
}

// Figures are delivery throughput against publishing alone.
func (r DeliverResult) Figures() []Figure {
	return []Figure{{Name: "deliver: events/s to a local receiver", Value: rate(r.Events, r.Deliver), Unit: "ev/s",
		Reference: rate(r.Events, r.Publish), RefName: "publishing alone", Goal: 0.5}}
}

// staticSource is one destination, as the control plane would list it.
type staticSource struct {
	d controlplane.ResolvedDestination
}

func (s staticSource) Destinations() ([]controlplane.ResolvedDestination, error) {
	return []controlplane.ResolvedDestination{s.d}, nil
}
func (staticSource) Fresh() error { return nil }

// Deliver publishes n audit events of one organization, then delivers them
// to one destination (json, default batch of 100 per POST) on a local
// receiver that verifies every signature, until the receiver holds all n.
func Deliver(ctx context.Context, n int, progress io.Writer) (DeliverResult, error) {
	res := DeliverResult{Events: n}
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-deliver-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	bn, err := startNATS(ctx, dir)
	if err != nil {
		return res, err
	}
	defer bn.close()
	nc, js := bn.nc, bn.js
	org := uuid.New()
	gen := synth.New(org, 5, 42)
	now := time.Now()
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		ev := gen.Event(now.Add(-time.Duration(i) * time.Millisecond))
		if msgs[i], err = producers.Message(&ev); err != nil {
			return res, err
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub, err := producers.New(nc, producers.DefaultConfig(), quiet)
	if err != nil {
		return res, err
	}
	say("publishing %d events of one organization", n)
	start := time.Now()
	if err := publishHalves(ctx, pub, msgs); err != nil {
		return res, err
	}
	res.Publish = time.Since(start)

	secret := "bench-secret-of-the-destination"
	recv, err := deliver.NewReceiver(deliver.ReceiverConfig{Secret: []byte(secret)})
	if err != nil {
		return res, err
	}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	dst := controlplane.ResolvedDestination{Destination: controlplane.Destination{ID: uuid.New(), OrgID: org, Name: "bench",
		Type: controlplane.DestHTTPS, URL: srv.URL + "/audit", Format: controlplane.FormatJSON, StartAt: start.Add(-time.Minute),
		SecretSet: true}, Secret: secret}
	cfg := deliver.DefaultConfig()
	cfg.Tick = 100 * time.Millisecond
	cfg.LeaseTTL = time.Second
	d, err := deliver.New(js, staticSource{dst}, egress.AllowLoopback(), cfg, quiet)
	if err != nil {
		return res, err
	}
	say("delivering them to a local receiver (one destination, batches of %d, every signature verified)", cfg.BatchSize)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = time.Now()
	go func() { done <- d.Run(dctx) }()
	defer func() { cancel(); <-done }()
	for recv.Counts().Unique < int64(n) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-done:
			return res, fmt.Errorf("deliverer ended: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Since(start) > 10*time.Minute {
			return res, fmt.Errorf("delivered %d of %d in 10 minutes", recv.Counts().Unique, n)
		}
	}
	res.Deliver = time.Since(start)
	c := recv.Counts()
	res.Posts = c.Deliveries
	if c.Rejected > 0 {
		return res, fmt.Errorf("the receiver refused %d deliveries", c.Rejected)
	}
	return res, nil
}
