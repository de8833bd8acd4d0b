package relaymetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/promopts"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Metrics are the relay's Prometheus collectors; the package doc lists them.
type Metrics struct {
	Published        *prometheus.CounterVec
	PublishErrors    prometheus.Counter
	BatchSize        prometheus.Histogram
	PublishDuration  prometheus.Histogram
	CommitToAck      prometheus.Histogram
	ConfirmedLSN     prometheus.Gauge
	ProgressLSN      prometheus.Gauge
	ProgressIgnored  *prometheus.CounterVec
	InFlight         prometheus.Gauge
	BufferBytes      prometheus.Gauge
	Invalid          *prometheus.CounterVec
	TopicUnavailable *prometheus.GaugeVec
	Reconnects       prometheus.Counter
	Pruned           prometheus.Counter
	Gap              *prometheus.GaugeVec
	ReplaySkipped    prometheus.Counter
	Slot             *SlotMetrics

	mu      sync.Mutex
	byTopic map[string]prometheus.Counter
}

// NewMetrics returns the metrics of the relay of slot, unregistered; l
// gives the gauges read live.
func NewMetrics(slot string, l Clock) *Metrics {
	const ns, sub = "pgoutbox", "relay"
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	f := promopts.Subsystem{Namespace: ns, Subsystem: sub}
	counter, counterVec, gauge, gaugeVec, histogram := f.Counter, f.CounterVec, f.Gauge, f.GaugeVec, f.Histogram
	return &Metrics{
		Published: counterVec("events_published_total",
			"Events acknowledged by Kafka, by topic (dead-letter records count under the dead-letter topic; topics past the first 1000 under (other)).", "topic"),
		PublishErrors: counter("publish_errors_total",
			"Failed Kafka connections, produce requests without an answer, and records the producer gave up on (each is retried)."),
		BatchSize: histogram("batch_size", prometheus.ExponentialBuckets(1, 4, 9),
			"Events per Kafka write."),
		PublishDuration: histogram("publish_duration_seconds", latency,
			"Duration of one Kafka write attempt."),
		CommitToAck: histogram("commit_to_ack_seconds", latency,
			"Time from an event's transaction commit to its Kafka acknowledgement."),
		ConfirmedLSN: gauge("confirmed_lsn",
			"WAL position last confirmed to the server (as a number)."),
		ProgressLSN: gauge("progress_lsn",
			"Exactly-once mode: end LSN of the last WAL transaction committed to Kafka (the progress record), as a number."),
		ProgressIgnored: counterVec("progress_ignored_total",
			"Exactly-once mode: records under the slot's progress key not used to skip WAL at a session start, by reason: not-relay (no pgoutbox-progress header: not written by a relay), unreadable, other-history (another system, timeline, slot creation or incarnation than the state row's), beyond-wal (past the server's current WAL), beyond-state (past the state row's ceiling: a restored snapshot or a clone).", "reason"),
		InFlight: gauge("in_flight_events",
			"Events read from the WAL and not yet acknowledged by Kafka."),
		BufferBytes: gauge("buffer_bytes",
			"Record bytes held between the WAL reader and Kafka (queued or being written); at most --buffer-bytes."),
		Invalid: counterVec("invalid_events_total",
			"Events that could not be published as they are, by reason (dead-lettered, or stopping the relay).", "reason"),
		TopicUnavailable: gaugeVec("topic_unavailable",
			"1 while writes to the topic fail because it does not exist (reason unknown-topic) or may not be written (reason not-authorized); the relay retries, then after --topic-unavailable-grace dead-letters its events (reason topic-unavailable) or, with --on-unavailable-topic=stop, stops.", "topic", "reason"),
		Reconnects: counter("reconnects_total",
			"Replication connections re-established after a failure."),
		Pruned: counter("pruned_rows_total",
			"Outbox rows deleted by pruning."),
		Gap: gaugeVec("gap",
			"1 when the relay found a gap (the slot cannot resume where it left off) and does not stream, by reason; see relay recover.", "slot", "reason"),
		ReplaySkipped: counter("replay_skipped_total",
			"Replayed WAL transactions not published again at a session start because Kafka already had them (they end at or before the relay state's acknowledged position)."),
		Slot:    newSlotMetrics(slot, l),
		byTopic: make(map[string]prometheus.Counter),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.Published, m.PublishErrors, m.BatchSize, m.PublishDuration, m.CommitToAck,
		m.ConfirmedLSN, m.ProgressLSN, m.ProgressIgnored, m.InFlight, m.BufferBytes, m.Invalid, m.TopicUnavailable, m.Reconnects, m.Pruned, m.Gap, m.ReplaySkipped}, m.Slot.collectors()...)
}

func (m *Metrics) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// Rows choose topics, so the topic label is capped: the first
// maxTopicSeries topics published to have series of their own, later ones
// count under OtherTopicLabel.
const maxTopicSeries = 1000

// PublishedTo returns the counter of topic, caching the child; past
// maxTopicSeries topics, the OtherTopicLabel one.
func (m *Metrics) PublishedTo(topic string) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byTopic[topic]
	if !ok {
		if len(m.byTopic) >= maxTopicSeries {
			topic = relaytype.OtherTopicLabel
			if c, ok = m.byTopic[topic]; ok {
				return c
			}
		}
		c = m.Published.WithLabelValues(topic)
		m.byTopic[topic] = c
	}
	return c
}
