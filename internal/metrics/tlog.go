package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLogObserver holds the metrics of the tamper-evidence log's role (the
// sequencer and the checkpointer: sequencer.Observer, checkpointer.Observer).
// Its kind label is a log's route segment (audit_logs, tool_executions);
// never an organization.
type TLogObserver struct {
	signed, publishFailed, appended *prometheus.CounterVec
	witness                         *prometheus.CounterVec
	lag                             prometheus.Gauge
	delay                           *prometheus.HistogramVec

	mu   sync.Mutex
	last map[string]time.Time // the last checkpoint signed, by kind
	now  func() time.Time
	desc *prometheus.Desc
}

// WitnessResults are the values of the witness submissions' result label.
var WitnessResults = []string{"cosigned", "conflict", "refused", "unavailable", "bad_answer"}

// WitnessSubmitted counts a submission of a checkpoint to a witness.
func (o *TLogObserver) WitnessSubmitted(result string) { o.witness.WithLabelValues(result).Inc() }

// TLogKinds are the values of the kind label.
var TLogKinds = []string{"audit_logs", "tool_executions"}

// TLog registers the tamper-evidence log's metrics and returns their
// observer. Call it once per registry (a second call panics: a wiring
// mistake), in the role that runs the sequencer and the checkpointer.
func (r *Registry) TLog() *TLogObserver {
	o := &TLogObserver{
		signed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tlog_checkpoints_signed_total",
			Help: "Checkpoints signed and stored, by log kind (audit_logs, tool_executions)."}, []string{"kind"}),
		publishFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tlog_checkpoint_publish_failures_total",
			Help: "Checkpoints stored but not published on the event stream (signed again next round), by log kind."}, []string{"kind"}),
		appended: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tlog_sequencer_leaves_appended_total",
			Help: "Leaves the sequencer appended to the logs, by log kind."}, []string{"kind"}),
		witness: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "tlog_witness_submissions_total",
			Help: "Checkpoints submitted to witnesses, by result: cosigned, conflict (a 409: sent again from the witness's size), refused (403, 422, or a witness beyond the checkpoint: a rolled-back or forked log), unavailable, bad_answer."}, []string{"result"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "tlog_sequencer_lag_messages",
			Help: "Commit marks (an organization's log with entries stored since the sequencer last looked: at most one per organization and kind) that the sequencer has not taken yet, after its last round."}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "tlog_sequencer_delay_seconds",
			Help:    "The longest an entry of each append waited from its storing in the event stream (created_time) to its leaf's append, by log kind; auditrail verify's --pending-grace must exceed its maximum.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}}, []string{"kind"}),
		last: map[string]time.Time{},
		now:  time.Now,
		desc: prometheus.NewDesc(Namespace+"_tlog_seconds_since_last_checkpoint",
			"Seconds since the last checkpoint of any log of the kind was signed (absent before the first).", []string{"kind"}, nil),
	}
	for _, k := range TLogKinds {
		o.signed.WithLabelValues(k)
		o.publishFailed.WithLabelValues(k)
		o.appended.WithLabelValues(k)
		o.delay.WithLabelValues(k)
	}
	for _, r := range WitnessResults {
		o.witness.WithLabelValues(r)
	}
	r.reg.MustRegister(o.signed, o.publishFailed, o.appended, o.witness, o.lag, o.delay, o)
	return o
}

// Describe implements prometheus.Collector (the seconds-since gauge).
func (o *TLogObserver) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

// Collect implements prometheus.Collector (the seconds-since gauge).
func (o *TLogObserver) Collect(ch chan<- prometheus.Metric) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for _, k := range TLogKinds {
		if t, ok := o.last[k]; ok {
			ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, max(0, now.Sub(t).Seconds()), k)
		}
	}
}

// CheckpointSigned counts a checkpoint signed and stored.
func (o *TLogObserver) CheckpointSigned(kind string) { o.signed.WithLabelValues(kind).Inc() }

// CheckpointPublishFailed counts a checkpoint stored but not published.
func (o *TLogObserver) CheckpointPublishFailed(kind string) {
	o.publishFailed.WithLabelValues(kind).Inc()
}

// CheckpointRound records when the last checkpoint of the kind was signed.
func (o *TLogObserver) CheckpointRound(kind string, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if last.After(o.last[kind]) {
		o.last[kind] = last
	}
}

// SequencerAppended counts leaves appended to a log of the kind.
func (o *TLogObserver) SequencerAppended(kind string, n int) {
	o.appended.WithLabelValues(kind).Add(float64(n))
}

// SequencerDelay records the longest wait of an append's entries.
func (o *TLogObserver) SequencerDelay(kind string, d time.Duration) {
	o.delay.WithLabelValues(kind).Observe(d.Seconds())
}

// SequencerLag records the commit marks the sequencer has not taken yet.
func (o *TLogObserver) SequencerLag(pending uint64) { o.lag.Set(float64(pending)) }
