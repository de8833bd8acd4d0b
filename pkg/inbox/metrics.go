package inbox

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_total",
			Help: "Deliveries handled by the inbox, by consumer and outcome."}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "processing_duration_seconds",
			Help: "Time to handle one delivery: claim, handler and commit.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		attempts: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "attempts",
			Help: "Attempts a message needed until it completed or was dead-lettered.", Buckets: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20}}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Handler failures recorded for a later retry."}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dead_lettered_total",
			Help: "Messages dead-lettered, by reason."}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "in_flight",
			Help: "Deliveries being handled now."}),
		stuck: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "stuck_processing",
			Help: "PROCESSING rows whose lease expired, as of the last RefreshMetrics call."}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "unfinished",
			Help: "Rows per status other than COMPLETED, as of the last RefreshMetrics call."}, []string{"status"}),
		oldestUnfinished: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "oldest_unfinished_seconds",
			Help: "Age of the oldest RECEIVED, PROCESSING or FAILED_RETRYABLE row (0 when none), as of the last RefreshMetrics call."}),
		messageAge: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "message_age_seconds",
			Help:    "Age of a message (from its Kafka record timestamp) when the inbox started handling it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fetch_errors_total",
			Help: "Kafka fetch errors the client reported to the consumer loop (it backs off and polls again)."}),
		queueBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "queue_bytes",
			Help: "Bytes of fetched records the consumer loop holds, queued or being handled (bounded by inboxkafka.Config.MaxQueueBytes)."}),
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
