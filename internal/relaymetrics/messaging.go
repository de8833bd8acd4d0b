package relaymetrics

import (
	"context"
	"errors"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// Messaging holds OpenTelemetry's messaging client metrics of the
// relay's Kafka writes, named as the conventions name them
// (messaging.client.sent.messages, messaging.client.operation.duration) in
// Prometheus' form, with their attributes as labels. It is a relay hook
// (relayhook.HookBatchWritten): the relay adds it to every run's hooks.
type Messaging struct {
	// Sent counts the records the relay attempted to write, by topic
	// and error type ("" when Kafka acknowledged them).
	Sent *prometheus.CounterVec
	// Duration observes each Kafka write, by error type.
	Duration *prometheus.HistogramVec

	okDuration prometheus.Observer // Duration of the writes acknowledged
	mu         sync.Mutex
	byTopic    map[string]prometheus.Counter // acknowledged records' counters
}

// NewMessaging returns the messaging metrics, unregistered.
func NewMessaging() *Messaging {
	constant := prometheus.Labels{"messaging_system": "kafka", "messaging_operation_name": "send"}
	m := &Messaging{
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "messaging_client_sent_messages_total", ConstLabels: constant,
			Help: "Records the relay attempted to write to Kafka (OpenTelemetry messaging.client.sent.messages), by topic and error type (empty: acknowledged); topics past the first 1000 under (other)."},
			[]string{"messaging_destination_name", "error_type"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "messaging_client_operation_duration_seconds", ConstLabels: constant,
			Help:    "Duration of each Kafka write of the relay (OpenTelemetry messaging.client.operation.duration), by error type (empty: acknowledged).",
			Buckets: []float64{.005, .01, .025, .05, .075, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}},
			[]string{"error_type"}),
		byTopic: make(map[string]prometheus.Counter),
	}
	m.okDuration = m.Duration.WithLabelValues("")
	return m
}

// OnBatchWritten counts the records of w and observes its duration.
func (m *Messaging) OnBatchWritten(w relayhook.BatchWritten) {
	d := m.okDuration
	if w.Err != nil {
		d = m.Duration.WithLabelValues(errorType(w.Err))
	}
	d.Observe(w.End.Sub(w.Start).Seconds())
	var (
		topic string
		n     int
	)
	flush := func() {
		if n > 0 {
			m.sentTo(topic).Add(float64(n))
		}
	}
	for i, r := range w.Records {
		var err error
		switch {
		case w.Errs != nil:
			err = w.Errs[i]
		case w.Err != nil:
			err = w.Err // the call failed as a whole
		}
		if err != nil {
			m.Sent.WithLabelValues(m.topicLabel(r.Topic()), errorType(err)).Inc()
			continue
		}
		if t := r.Topic(); t != topic {
			flush()
			topic, n = t, 0
		}
		n++
	}
	flush()
}

// sentTo is the counter of records Kafka acknowledged in topic.
func (m *Messaging) sentTo(topic string) prometheus.Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.byTopic[topic]; ok {
		return c
	}
	label := m.topicLabelLocked(topic) // past the cap, one entry for them all
	c, ok := m.byTopic[label]
	if !ok {
		c = m.Sent.WithLabelValues(label, "")
		m.byTopic[label] = c
	}
	return c
}

// topicLabel is topic's label value: relaytype.OtherTopicLabel past the first
// maxTopicSeries topics (rows choose topics).
func (m *Messaging) topicLabel(topic string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.topicLabelLocked(topic)
}

func (m *Messaging) topicLabelLocked(topic string) string {
	if _, ok := m.byTopic[topic]; !ok && len(m.byTopic) >= maxTopicSeries {
		return relaytype.OtherTopicLabel
	}
	return topic
}

// errorType is the error.type of err: the Kafka error code's name, timeout,
// canceled, _OTHER; empty for none.
func errorType(err error) string {
	var ke *kerr.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

func (m *Messaging) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Sent, m.Duration}
}
