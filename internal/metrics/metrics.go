// Package metrics is the Prometheus side of every role: one registry per
// process (never the global one, so that several instances in one test
// process do not collide) with the Go and process collectors, the metrics
// named auditrail_…, and a listener of its own that answers GET /metrics
// only (never the tenant API's listener).
//
// The other packages do not import client_golang: each declares the small
// observer interface it needs (httpapi.Observer, ingest.Observer,
// hookproxy.Observer, toolrunner.Observer, deliver.Observer), which
// *Registry implements; cmd/auditrail wires them.
//
// Labels are low-cardinality by construction: a route is its pattern
// (/api/v1/orgs/:org_id/audit_logs), a status its code, a hook point one of
// access/pre/post, a toolkit one of the registered toolkits, an outcome a
// fixed kind. No organization, user, URL or event id is ever a label.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of auditrail.
const Namespace = "auditrail"

// latencyBuckets are the buckets of request, commit and hook latencies
// (seconds): 1 ms to 30 s.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// lagBuckets are the buckets of delivery lag (seconds): 10 ms to 1 h.
var lagBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Registry holds the metrics of one process.
type Registry struct {
	reg *prometheus.Registry

	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	rateLimited     *prometheus.CounterVec
	commitDuration  *prometheus.HistogramVec
	hookCalls       *prometheus.CounterVec
	hookFailOpen    *prometheus.CounterVec
	toolExecutions  *prometheus.CounterVec
	toolDuration    *prometheus.HistogramVec
	deliveryLag     prometheus.Histogram
	deliveredEvents prometheus.Counter
	deliveryFailed  prometheus.Counter
	deliveryReject  *prometheus.CounterVec
}

// New returns a registry with the Go and process collectors and the
// metrics the observers feed.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { r.reg.MustRegister(c) }
	r.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status code."}, []string{"route", "method", "code"})
	r.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
		Help: "Time to answer an HTTP request, by route pattern and method.", Buckets: latencyBuckets}, []string{"route", "method"})
	r.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "http_rate_limited_total",
		Help: "Requests refused with 429 by the shared rate limit, by route pattern."}, []string{"route"})
	r.commitDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "ingest_commit_duration_seconds",
		Help: "Time to commit an ingest batch to the store (dead letters included), by kind of event.", Buckets: latencyBuckets}, []string{"kind"})
	r.hookCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "hook_calls_total",
		Help: "Hook calls by point (access, pre, post), outcome (allow, deny, failed_open, failed_closed) and the state of the hook's circuit breaker after the call (closed, open, half-open)."},
		[]string{"point", "outcome", "breaker"})
	r.hookFailOpen = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "hook_fail_open_allowed_total",
		Help: "Failed hook calls allowed because the point fails open, by point."}, []string{"point"})
	r.toolExecutions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tool_executions_total",
		Help: "Tool executions by toolkit and outcome (OK or the error kind)."}, []string{"toolkit", "outcome"})
	r.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "tool_execution_duration_seconds",
		Help: "Duration of a tool execution (hooks included), by toolkit.", Buckets: latencyBuckets}, []string{"toolkit"})
	r.deliveryLag = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "delivery_lag_seconds",
		Help: "Time from an event's storage in the stream to its delivery to a destination (2xx), per event.", Buckets: lagBuckets})
	r.deliveredEvents = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "delivered_events_total",
		Help: "Events delivered to destinations (2xx)."})
	r.deliveryFailed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "delivery_failed_attempts_total",
		Help: "Failed attempts to deliver a batch to a destination."})
	r.deliveryReject = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "delivery_rejected_events_total",
		Help: "Events not delivered to any destination, by reason: undecodable, or organization_mismatch (the payload's organization_id is not its subject's)."},
		[]string{"reason"})
	// Both reasons are served from the start (0), so that an alert on
	// their rate needs no absent().
	for _, reason := range []string{"undecodable", "organization_mismatch"} {
		r.deliveryReject.WithLabelValues(reason)
	}
	for _, c := range []prometheus.Collector{r.httpRequests, r.httpDuration, r.rateLimited, r.commitDuration, r.hookCalls, r.hookFailOpen,
		r.toolExecutions, r.toolDuration, r.deliveryLag, r.deliveredEvents, r.deliveryFailed, r.deliveryReject} {
		f(c)
	}
	return r
}

// Prometheus returns the underlying registry (to gather in tests).
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// Register adds a collector; it panics on a duplicate (a wiring mistake).
func (r *Registry) Register(c prometheus.Collector) { r.reg.MustRegister(c) }

// GaugeFunc registers a gauge auditrail_<name> read from fn at each scrape.
func (r *Registry) GaugeFunc(name, help string, labels prometheus.Labels, fn func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: labels}, fn))
}

// CounterFunc registers a counter auditrail_<name> (ending in _total) read
// from fn, which must never decrease, at each scrape.
func (r *Registry) CounterFunc(name, help string, labels prometheus.Labels, fn func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help, ConstLabels: labels}, fn))
}

// Handler answers GET /metrics in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	h := promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Timeout: 10 * time.Second})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return mux
}

// Serve serves Handler on addr until ctx ends. The listener is bound
// before Serve returns an error for it; nil means ctx ended.
func (r *Registry) Serve(ctx context.Context, addr string, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener %s: %w", addr, err)
	}
	return r.ServeListener(ctx, l, log)
}

// ServeListener serves Handler on l until ctx ends, then closes it.
func (r *Registry) ServeListener(ctx context.Context, l net.Listener, log *slog.Logger) error {
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	log.Info("metrics: serving /metrics", "addr", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics listener: %w", err)
	}
	return nil
}

// ObserveRequest counts an answered request (httpapi.Observer).
func (r *Registry) ObserveRequest(route, method string, code int, d time.Duration) {
	r.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	r.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// RateLimited counts a request refused by the rate limit (httpapi.Observer).
func (r *Registry) RateLimited(route string) { r.rateLimited.WithLabelValues(route).Inc() }

// Ingest returns the observer of the ingester of kind (audit, execution).
func (r *Registry) Ingest(kind string) IngestObserver {
	return IngestObserver{h: r.commitDuration.WithLabelValues(kind)}
}

// IngestObserver times the commits of one ingester (ingest.Observer).
type IngestObserver struct{ h prometheus.Observer }

// ObserveCommit records the duration of one batch's commit.
func (o IngestObserver) ObserveCommit(d time.Duration, _ int) { o.h.Observe(d.Seconds()) }

// HookCall counts a hook call (hookproxy.Observer).
func (r *Registry) HookCall(point, outcome, breaker string) {
	r.hookCalls.WithLabelValues(point, outcome, breaker).Inc()
}

// HookFailOpen counts a failed call allowed by fail-open (hookproxy.Observer).
func (r *Registry) HookFailOpen(point string) { r.hookFailOpen.WithLabelValues(point).Inc() }

// ToolExecution counts an execution (toolrunner.Observer).
func (r *Registry) ToolExecution(toolkit, outcome string, d time.Duration) {
	r.toolExecutions.WithLabelValues(toolkit, outcome).Inc()
	r.toolDuration.WithLabelValues(toolkit).Observe(d.Seconds())
}

// Delivered records the lag of each event of a delivered chunk
// (deliver.Observer).
func (r *Registry) Delivered(lags []time.Duration) {
	for _, l := range lags {
		r.deliveryLag.Observe(max(0, l.Seconds()))
	}
	r.deliveredEvents.Add(float64(len(lags)))
}

// DeliveryFailed counts a failed delivery attempt (deliver.Observer).
func (r *Registry) DeliveryFailed() { r.deliveryFailed.Inc() }

// DeliveryRejected counts an event not delivered (deliver.Observer).
func (r *Registry) DeliveryRejected(reason string) { r.deliveryReject.WithLabelValues(reason).Inc() }
