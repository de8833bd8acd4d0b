package inbox

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/promopts"
)

// metrics holds the collectors of one consumer. They are registered with
// the consumer as a constant label, so that several consumers share a
// Registerer while a second Inbox of the same consumer fails to register.
type metrics struct {
	outcomes     *prometheus.CounterVec // by outcome
	duration     prometheus.Histogram
	attempts     prometheus.Histogram
	retries      prometheus.Counter
	deadLettered *prometheus.CounterVec // by reason
	inFlight     prometheus.Gauge
	stuck        prometheus.Gauge
	// unfinished counts rows per status other than COMPLETED; oldest
	// unfinished is the age of the oldest RECEIVED, PROCESSING or
	// FAILED_RETRYABLE row (as of the last RefreshMetrics call).
	unfinished       *prometheus.GaugeVec
	oldestUnfinished prometheus.Gauge
	messageAge       prometheus.Histogram
	fetchErrors      prometheus.Counter
	queueBytes       prometheus.Gauge
}

func newMetrics() *metrics {
	const ns, sub = "pgoutbox", "inbox"
	f := promopts.Subsystem{Namespace: ns, Subsystem: sub}
	counter, counterVec, gauge, gaugeVec, histogram := f.Counter, f.CounterVec, f.Gauge, f.GaugeVec, f.Histogram
	m := &metrics{
		outcomes: counterVec("messages_total",
			"Deliveries handled by the inbox, by consumer and outcome.", "outcome"),
		duration: histogram("processing_duration_seconds", prometheus.ExponentialBuckets(0.0005, 2, 16),
			"Time to handle one delivery: claim, handler and commit."),
		attempts: histogram("attempts", []float64{1, 2, 3, 4, 5, 7, 10, 15, 20},
			"Attempts a message needed until it completed or was dead-lettered."),
		retries: counter("retries_total",
			"Handler failures recorded for a later retry."),
		deadLettered: counterVec("dead_lettered_total",
			"Messages dead-lettered, by reason.", "reason"),
		inFlight: gauge("in_flight",
			"Deliveries being handled now."),
		stuck: gauge("stuck_processing",
			"PROCESSING rows whose lease expired, as of the last RefreshMetrics call."),
		unfinished: gaugeVec("unfinished",
			"Rows per status other than COMPLETED, as of the last RefreshMetrics call.", "status"),
		oldestUnfinished: gauge("oldest_unfinished_seconds",
			"Age of the oldest RECEIVED, PROCESSING or FAILED_RETRYABLE row (0 when none), as of the last RefreshMetrics call."),
		messageAge: histogram("message_age_seconds", prometheus.ExponentialBuckets(0.001, 4, 12),
			"Age of a message (from its Kafka record timestamp) when the inbox started handling it."),
		fetchErrors: counter("fetch_errors_total",
			"Kafka fetch errors the client reported to the consumer loop (it backs off and polls again)."),
		queueBytes: gauge("queue_bytes",
			"Bytes of fetched records the consumer loop holds, queued or being handled (bounded by inboxkafka.Config.MaxQueueBytes)."),
	}
	// Pre-create the outcome series so dashboards see zeros.
	for o := Processed; o <= DeadLettered; o++ {
		m.outcomes.WithLabelValues(o.String())
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.outcomes, m.duration, m.attempts, m.retries, m.deadLettered, m.inFlight, m.stuck,
		m.unfinished, m.oldestUnfinished, m.messageAge, m.fetchErrors, m.queueBytes}
}

// register registers the collectors on reg with the constant label
// consumer; on a failure (another Inbox of this consumer registered there,
// or a collector of the same name with other labels) it unregisters those
// it registered and returns the error.
func (m *metrics) register(reg prometheus.Registerer, consumer string) error {
	if reg == nil {
		return nil
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"consumer": consumer}, reg)
	cs := m.collectors()
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("inbox: register metrics of consumer %q: %w", consumer, err)
		}
	}
	return nil
}
