package relay

import (
	"log/slog"

	"github.com/segmentio/kafka-go"
)

// deadLetter turns ev, whose problem is ev.invalid, into its dead-letter
// record: the same key and value (no value when the value is what is too
// large), the reason in dlq-reason and dlq-detail, the original topic, and
// the event's normal headers. It counts and logs the event.
func deadLetter(c *Config, m *metrics, ev *event) {
	inv := ev.invalid
	orig := ev.msg
	hs := make([]kafka.Header, 0, len(orig.Headers)+4)
	hs = append(hs,
		kafka.Header{Key: "dlq-reason", Value: []byte(inv.Reason)},
		kafka.Header{Key: "dlq-detail", Value: []byte(inv.Detail)},
	)
	if orig.Topic != "" {
		hs = append(hs, kafka.Header{Key: "original-topic", Value: []byte(orig.Topic)})
	}
	hasID := false
	for _, h := range orig.Headers {
		hasID = hasID || h.Key == "message-id"
		hs = append(hs, h)
	}
	if !hasID {
		id := ""
		if ev.id != [16]byte{} {
			id = ev.id.String()
		}
		hs = append(hs, kafka.Header{Key: "message-id", Value: []byte(id)})
	}
	value := orig.Value
	if inv.Reason == ReasonTooLarge {
		value = nil
	}
	ev.msg = kafka.Message{Topic: c.DeadLetterTopic, Key: orig.Key, Value: value, Headers: hs, Time: orig.Time}
	m.invalid.WithLabelValues(inv.Reason).Inc()
	c.Logger.Warn("outbox event sent to the dead-letter topic", "message_id", inv.MessageID.String(),
		"reason", inv.Reason, "detail", inv.Detail, "original_topic", orig.Topic, slog.String("dead_letter_topic", c.DeadLetterTopic))
}
