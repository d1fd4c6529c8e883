package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
)

// addMetricsFlag adds --metrics, the listener of GET /metrics (off when
// empty, the default of every role, dev included). It is a listener of
// its own, never the API's: the operator's Prometheus scrapes it, tenants
// do not reach it.
func addMetricsFlag(fs *cli.Flags) *string {
	return fs.String("metrics", "", "", "listener of GET /metrics (Prometheus text format) for the operator, apart from the API; empty: off")
}

// startMetrics binds addr and serves the process's registry on it until
// ctx ends; nil (and no error) when addr is empty. Every helper below
// takes a nil registry as "no metrics".
func startMetrics(ctx context.Context, addr string, log *slog.Logger) (*metrics.Registry, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	m := metrics.New()
	go func() {
		if err := m.ServeListener(ctx, l, log); err != nil {
			log.Error("metrics listener", "err", err)
		}
	}()
	return m, nil
}

// observeApp counts the requests of app; call it before the routes.
func observeApp(m *metrics.Registry, app *fiber.App) {
	if m != nil {
		httpapi.Observe(app, m)
	}
}

// ingester is what the metrics read of an ingest consumer.
type ingester interface {
	Stats() ingest.Stats
	ObserveWith(ingest.Observer)
}

// observeIngest registers the counters of the audit and execution
// ingesters, times their commits, and polls their durable consumers and
// the streams' sizes (the dead letters) at each scrape, over nc (the
// ingest role's connection, allowed to read them).
func observeIngest(m *metrics.Registry, nc *nats.Conn, audit, executions ingester, durables ...string) error {
	if m == nil {
		return nil
	}
	for kind, in := range map[string]ingester{"audit": audit, "execution": executions} {
		in.ObserveWith(m.Ingest(kind))
		l := prometheus.Labels{"kind": kind}
		m.CounterFunc("ingest_batches_total", "Batches committed to the store.", l, func() float64 { return float64(in.Stats().Batches) })
		m.CounterFunc("ingest_rows_total", "Events written to the store.", l, func() float64 { return float64(in.Stats().Stored) })
		m.CounterFunc("ingest_dead_lettered_total", "Events sent to the dead-letter stream (undecodable, invalid, or refused by the store).", l,
			func() float64 { return float64(in.Stats().DeadLettered) })
		m.CounterFunc("ingest_store_retries_total", "Failed batch writes retried (store outages).", l, func() float64 { return float64(in.Stats().Retries) })
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	m.Register(metrics.NewJetStreamCollector(js, schemas.StreamEvents, durables, []string{schemas.StreamEvents, schemas.StreamDLQ}))
	return nil
}

// observeAuditOutbox registers the depth of the control plane's outbox of
// audit events (admin changes not yet in the stream).
func observeAuditOutbox(m *metrics.Registry, admin *controlplane.Service) {
	if m != nil {
		m.GaugeFunc("outbox_pending_events", "Events waiting in an outbox to be published to the stream.", prometheus.Labels{"outbox": "controlplane"},
			func() float64 { return float64(admin.PendingEvents()) })
	}
}

// observeToolRunner counts executions and hook calls, and registers the
// depth of the execution outbox and the breakers not closed.
func observeToolRunner(m *metrics.Registry, runner *toolrunner.Runner, proxy *hookproxy.Proxy, outbox *producers.Outbox) {
	if m == nil {
		return
	}
	runner.ObserveWith(m)
	proxy.Observe(m)
	m.GaugeFunc("outbox_pending_events", "Events waiting in an outbox to be published to the stream.", prometheus.Labels{"outbox": "execution"},
		func() float64 { return float64(outbox.Stats().Pending) })
	for _, pt := range []hookproxy.Point{hookproxy.Access, hookproxy.Pre, hookproxy.Post} {
		m.GaugeFunc("hook_breakers_open", "Hook circuit breakers open or half-open, by point.", prometheus.Labels{"point": string(pt)},
			func() float64 { return float64(proxy.OpenBreakers()[pt]) })
	}
}

// observeDeliver measures the deliveries.
func observeDeliver(m *metrics.Registry, d *deliver.Deliverer) {
	if m != nil {
		d.ObserveWith(m)
	}
}
