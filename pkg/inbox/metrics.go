package inbox

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the collectors of one consumer, curried with its label.
type metrics struct {
	outcomes     *prometheus.CounterVec // by outcome
	duration     prometheus.Observer
	attempts     prometheus.Observer
	retries      prometheus.Counter
	deadLettered *prometheus.CounterVec // by reason
	inFlight     prometheus.Gauge
	stuck        prometheus.Gauge
	// unfinished counts rows per status other than COMPLETED; oldest
	// unfinished is the age of the oldest RECEIVED, PROCESSING or
	// FAILED_RETRYABLE row (as of the last Stats call).
	unfinished       *prometheus.GaugeVec
	oldestUnfinished prometheus.Gauge
	messageAge       prometheus.Observer
	fetchErrors      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, consumer string) (*metrics, error) {
	outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgoutbox_inbox_messages_total",
		Help: "Deliveries handled by the inbox, by consumer and outcome.",
	}, []string{"consumer", "outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgoutbox_inbox_processing_duration_seconds",
		Help:    "Time to handle one delivery: claim, handler and commit.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"consumer"})
	attempts := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgoutbox_inbox_attempts",
		Help:    "Attempts a message needed until it completed or was dead-lettered.",
		Buckets: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20},
	}, []string{"consumer"})
	retries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgoutbox_inbox_retries_total",
		Help: "Handler failures recorded for a later retry.",
	}, []string{"consumer"})
	dead := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgoutbox_inbox_dead_lettered_total",
		Help: "Messages dead-lettered, by reason.",
	}, []string{"consumer", "reason"})
	inFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgoutbox_inbox_in_flight",
		Help: "Deliveries being handled now.",
	}, []string{"consumer"})
	stuck := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgoutbox_inbox_stuck_processing",
		Help: "PROCESSING rows whose lease expired, as of the last Stats call.",
	}, []string{"consumer"})
	unfinished := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgoutbox_inbox_unfinished",
		Help: "Rows per status other than COMPLETED, as of the last Stats call.",
	}, []string{"consumer", "status"})
	oldestUnfinished := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgoutbox_inbox_oldest_unfinished_seconds",
		Help: "Age of the oldest RECEIVED, PROCESSING or FAILED_RETRYABLE row (0 when none), as of the last Stats call.",
	}, []string{"consumer"})
	age := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgoutbox_inbox_message_age_seconds",
		Help:    "Age of a message (from its Kafka record timestamp) when the inbox started handling it.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
	}, []string{"consumer"})
	fetchErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgoutbox_inbox_fetch_errors_total",
		Help: "Kafka fetch errors the consumer loop survived (it backs off and fetches again).",
	}, []string{"consumer"})

	var err error
	if reg != nil {
		outcomes, err = register(reg, outcomes)
		if err == nil {
			duration, err = register(reg, duration)
		}
		if err == nil {
			attempts, err = register(reg, attempts)
		}
		if err == nil {
			retries, err = register(reg, retries)
		}
		if err == nil {
			dead, err = register(reg, dead)
		}
		if err == nil {
			inFlight, err = register(reg, inFlight)
		}
		if err == nil {
			stuck, err = register(reg, stuck)
		}
		if err == nil {
			unfinished, err = register(reg, unfinished)
		}
		if err == nil {
			oldestUnfinished, err = register(reg, oldestUnfinished)
		}
		if err == nil {
			age, err = register(reg, age)
		}
		if err == nil {
			fetchErrors, err = register(reg, fetchErrors)
		}
		if err != nil {
			return nil, fmt.Errorf("inbox: register metrics: %w", err)
		}
	}
	l := prometheus.Labels{"consumer": consumer}
	m := &metrics{
		outcomes:         outcomes.MustCurryWith(l),
		duration:         duration.With(l),
		attempts:         attempts.With(l),
		retries:          retries.With(l),
		deadLettered:     dead.MustCurryWith(l),
		inFlight:         inFlight.With(l),
		stuck:            stuck.With(l),
		unfinished:       unfinished.MustCurryWith(l),
		oldestUnfinished: oldestUnfinished.With(l),
		messageAge:       age.With(l),
		fetchErrors:      fetchErrors.With(l),
	}
	// Pre-create the outcome series so dashboards see zeros.
	for o := Processed; o <= DeadLettered; o++ {
		m.outcomes.WithLabelValues(o.String())
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same description, so that several consumers share one Registerer.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
