package relay

import (
	"log/slog"

	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// maxDetailBytes caps dlq-detail in a slim dead-letter record.
const maxDetailBytes = 1024

// deadLetter turns ev, whose problem is ev.invalid, into its dead-letter
// record: the same key and value (no value when the value is what is too
// large), the reason in dlq-reason and dlq-detail, the original topic, and
// the event's normal headers. When that record would still be over
// MaxMessageBytes (a huge key or headers object), it is slim instead (see
// slimDeadLetter). It counts and logs the event.
func deadLetter(c *Config, m *metrics, ev *event) {
	inv := ev.invalid
	orig := ev.msg
	hs := make([]kafka.Header, 0, len(orig.Headers)+4)
	hs = append(hs,
		kafka.Header{Key: contract.HeaderDLQReason, Value: []byte(inv.Reason)},
		kafka.Header{Key: contract.HeaderDLQDetail, Value: []byte(inv.Detail)},
	)
	if orig.Topic != "" {
		hs = append(hs, kafka.Header{Key: contract.HeaderOriginalTopic, Value: []byte(orig.Topic)})
	}
	hasID := false
	for _, h := range orig.Headers {
		hasID = hasID || h.Key == contract.HeaderMessageID
		hs = append(hs, h)
	}
	if !hasID {
		hs = append(hs, kafka.Header{Key: contract.HeaderMessageID, Value: []byte(messageID(ev))})
	}
	value := orig.Value
	if inv.Reason == ReasonTooLarge {
		value = nil
	}
	ev.msg = kafka.Message{Topic: c.DeadLetterTopic, Key: orig.Key, Value: value, Headers: hs, Time: orig.Time}
	slim := recordSize(&ev.msg) > c.MaxMessageBytes
	if slim {
		slimDeadLetter(ev)
	}
	m.invalid.WithLabelValues(inv.Reason).Inc()
	c.Logger.Warn("outbox event sent to the dead-letter topic", "message_id", inv.MessageID.String(),
		"reason", inv.Reason, "detail", truncateString(inv.Detail, maxDetailBytes), "original_topic", orig.Topic,
		slog.String("dead_letter_topic", c.DeadLetterTopic), "slim", slim)
}

// slimDeadLetter reduces the dead-letter record of ev to what always fits:
// no key, no value, and only the headers message-id, dlq-reason, dlq-detail
// (cut to maxDetailBytes) and original-topic.
func slimDeadLetter(ev *event) {
	var hs []kafka.Header
	for _, h := range ev.msg.Headers {
		switch h.Key {
		case contract.HeaderDLQDetail:
			hs = append(hs, kafka.Header{Key: h.Key, Value: []byte(truncateString(string(h.Value), maxDetailBytes))})
		case contract.HeaderDLQReason, contract.HeaderOriginalTopic, contract.HeaderMessageID:
			hs = append(hs, h)
		}
	}
	ev.msg.Key, ev.msg.Value, ev.msg.Headers = nil, nil, hs
	ev.slim = true
}

// messageID is ev's message ID as text, empty when it has none.
func messageID(ev *event) string {
	if ev.id == [16]byte{} {
		return ""
	}
	return ev.id.String()
}

// truncateString cuts s to at most n bytes, marking the cut.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
