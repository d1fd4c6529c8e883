package metrics

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// infoTimeout bounds the JetStream requests of one scrape.
const infoTimeout = 3 * time.Second

var (
	consumerPendingDesc = prometheus.NewDesc(Namespace+"_ingest_consumer_pending_messages",
		"Messages of the stream not yet delivered to the ingest consumer (its lag), from the consumer info.", []string{"consumer"}, nil)
	consumerAckPendingDesc = prometheus.NewDesc(Namespace+"_ingest_consumer_ack_pending_messages",
		"Messages delivered to the ingest consumer and not yet acknowledged.", []string{"consumer"}, nil)
	consumerRedeliveredDesc = prometheus.NewDesc(Namespace+"_ingest_consumer_redelivered_messages",
		"Messages delivered more than once and not yet acknowledged, from the consumer info.", []string{"consumer"}, nil)
	streamMessagesDesc = prometheus.NewDesc(Namespace+"_stream_messages",
		"Messages held by a stream (AUDITRAIL_DLQ: the dead letters), from the stream info.", []string{"stream"}, nil)
	streamBytesDesc = prometheus.NewDesc(Namespace+"_stream_bytes",
		"Bytes held by a stream, from the stream info.", []string{"stream"}, nil)
	infoErrorsDesc = prometheus.NewDesc(Namespace+"_jetstream_info_errors",
		"JetStream info requests that failed during this scrape (their metrics are missing from it).", nil, nil)
)

// JetStreamCollector reads consumer and stream info at each scrape: the
// ingest consumers' pending and redelivered messages, the streams' sizes.
// A failed request leaves its metrics out of the scrape and counts in
// auditrail_jetstream_info_errors.
type JetStreamCollector struct {
	js        jetstream.JetStream
	stream    string   // of the consumers
	consumers []string // durable names
	streams   []string
}

// NewJetStreamCollector watches the durable consumers of stream and the
// streams named.
func NewJetStreamCollector(js jetstream.JetStream, stream string, consumers, streams []string) *JetStreamCollector {
	return &JetStreamCollector{js: js, stream: stream, consumers: consumers, streams: streams}
}

// Describe implements prometheus.Collector.
func (c *JetStreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{consumerPendingDesc, consumerAckPendingDesc, consumerRedeliveredDesc, streamMessagesDesc, streamBytesDesc, infoErrorsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *JetStreamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	errs := 0
	for _, name := range c.consumers {
		cons, err := c.js.Consumer(ctx, c.stream, name)
		if err != nil {
			errs++
			continue
		}
		info := cons.CachedInfo() // fetched by Consumer
		ch <- prometheus.MustNewConstMetric(consumerPendingDesc, prometheus.GaugeValue, float64(info.NumPending), name)
		ch <- prometheus.MustNewConstMetric(consumerAckPendingDesc, prometheus.GaugeValue, float64(info.NumAckPending), name)
		ch <- prometheus.MustNewConstMetric(consumerRedeliveredDesc, prometheus.GaugeValue, float64(info.NumRedelivered), name)
	}
	for _, name := range c.streams {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			errs++
			continue
		}
		info := s.CachedInfo() // fetched by Stream
		ch <- prometheus.MustNewConstMetric(streamMessagesDesc, prometheus.GaugeValue, float64(info.State.Msgs), name)
		ch <- prometheus.MustNewConstMetric(streamBytesDesc, prometheus.GaugeValue, float64(info.State.Bytes), name)
	}
	ch <- prometheus.MustNewConstMetric(infoErrorsDesc, prometheus.GaugeValue, float64(errs))
}
