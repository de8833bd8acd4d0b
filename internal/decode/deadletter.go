package decode

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// maxTruncatedBytes bounds dlq-truncated.
const maxTruncatedBytes = 1024

// DeadLetters shapes the dead-letter records of invalid events: the WAL
// reader and backfill call it for an event the decoder found invalid, the
// sink for a record Kafka refused for good. Its fields are relay.Config's.
type DeadLetters struct {
	// Topic is the dead-letter topic.
	Topic string
	// MaxMessageBytes bounds a record; InstanceID, when set, is the
	// relay-instance header the WAL reader adds after shaping.
	MaxMessageBytes int
	InstanceID      string
	// Invalid counts the invalid events by reason
	// (pgoutbox_relay_invalid_events_total); nil counts nothing.
	Invalid *prometheus.CounterVec
	// Logger receives one warning per dead-lettered event.
	Logger *slog.Logger
}

// Shape turns ev, whose problem is ev.Invalid, into its dead-letter
// record: the same key and value (no value when the value is what is too
// large), the reason in dlq-reason and dlq-detail, the original topic, and
// the event's headers, each cut to its bound (dlq-truncated then says what
// was cut). Its size is checked last: over MaxMessageBytes (less the
// relay-instance header stage adds), it loses its value, then its key, then
// becomes the minimal record (see MinimalDeadLetter). It counts and logs
// the event, with bounded excerpts only.
func (c *DeadLetters) Shape(ev *Event) {
	inv := ev.Invalid
	orig := ev.Record
	var cut truncation
	hs := make([]publish.Header, 0, len(orig.Headers)+5)
	hs = append(hs,
		publish.Header{Key: contract.HeaderDLQReason, Value: []byte(inv.Reason)},
		publish.Header{Key: contract.HeaderDLQDetail, Value: contract.Cut([]byte(inv.Detail), MaxDetailBytes)},
	)
	origTopic := orig.Topic
	if origTopic != "" {
		if len(origTopic) > contract.MaxTopicBytes {
			origTopic = string(contract.Cut([]byte(origTopic), contract.MaxTopicBytes))
			cut.add(contract.HeaderOriginalTopic)
		}
		hs = append(hs, publish.Header{Key: contract.HeaderOriginalTopic, Value: []byte(origTopic)})
	}
	hasID := false
	for _, h := range orig.Headers {
		if len(h.Key) > relaytype.MaxDeadLetterHeaderNameBytes {
			cut.add("headers")
			continue
		}
		hasID = hasID || h.Key == contract.HeaderMessageID
		if len(h.Value) > relaytype.MaxDeadLetterHeaderBytes {
			h.Value = contract.Cut(h.Value, relaytype.MaxDeadLetterHeaderBytes)
			cut.add(h.Key)
		}
		hs = append(hs, h)
	}
	if !hasID {
		hs = append(hs, publish.Header{Key: contract.HeaderMessageID, Value: []byte(ev.MessageID())})
	}
	value := orig.Value
	if inv.Reason == relaytype.ReasonTooLarge && value != nil {
		value = nil
		cut.add("value")
	}
	ev.Record = publish.Record{Topic: c.Topic, Key: orig.Key, Value: value, Headers: hs, Timestamp: orig.Timestamp, Pos: orig.Pos}
	limit := deadLetterLimit(c)
	size := func() int {
		return RecordSize(&ev.Record) + len(contract.HeaderDLQTruncated) + maxTruncatedBytes
	}
	if size() > limit && ev.Record.Value != nil {
		ev.Record.Value = nil
		cut.add("value")
	}
	if size() > limit && ev.Record.Key != nil {
		ev.Record.Key = nil
		cut.add("key")
	}
	if size() > limit {
		MinimalDeadLetter(ev, fmt.Sprintf("the dead-letter record was over max message bytes (%d) even without key and value", c.MaxMessageBytes))
	} else if v := cut.value(); v != nil {
		ev.Record.Headers = append(ev.Record.Headers, publish.Header{Key: contract.HeaderDLQTruncated, Value: v})
	}
	if c.Invalid != nil {
		c.Invalid.WithLabelValues(inv.Reason).Inc()
	}
	c.Logger.Warn("outbox event sent to the dead-letter topic", "message_id", inv.MessageID.String(),
		"reason", inv.Reason, "detail", string(contract.Cut([]byte(inv.Detail), MaxDetailBytes)), "original_topic", origTopic,
		slog.String("dead_letter_topic", c.Topic), "minimal", ev.Minimal, "truncated", string(cut.value()))
}

// deadLetterLimit is the most RecordSize a dead-letter record may have:
// MaxMessageBytes less the relay-instance header the stream adds.
func deadLetterLimit(c *DeadLetters) int {
	limit := c.MaxMessageBytes
	if c.InstanceID != "" {
		limit -= len(contract.HeaderRelayInstance) + len(c.InstanceID)
	}
	return limit
}

// MinimalDeadLetter reduces the dead-letter record of ev to what always
// fits: no key, no value, and only the headers message-id, dlq-reason,
// dlq-detail (saying why, then the event's detail, cut to MaxDetailBytes),
// original-topic (at most 249 bytes) and dlq-truncated ("key,value,headers").
// Only a dead-letter topic refusing this record stops the relay.
func MinimalDeadLetter(ev *Event, why string) {
	var id, topic []byte
	for _, h := range ev.Record.Headers {
		switch h.Key {
		case contract.HeaderMessageID:
			id = h.Value
		case contract.HeaderOriginalTopic:
			topic = h.Value
		}
	}
	if id == nil {
		id = []byte(ev.MessageID())
	}
	detail := why + "; it holds only message-id, dlq-reason, dlq-detail and original-topic. The event's problem: " + ev.Invalid.Detail
	hs := []publish.Header{
		{Key: contract.HeaderDLQReason, Value: []byte(ev.Invalid.Reason)},
		{Key: contract.HeaderDLQDetail, Value: contract.Cut([]byte(detail), MaxDetailBytes)},
	}
	if topic != nil {
		hs = append(hs, publish.Header{Key: contract.HeaderOriginalTopic, Value: contract.Cut(topic, contract.MaxTopicBytes)})
	}
	hs = append(hs,
		publish.Header{Key: contract.HeaderMessageID, Value: contract.Cut(id, 64)},
		publish.Header{Key: contract.HeaderDLQTruncated, Value: []byte("key,value,headers")},
	)
	ev.Record.Key, ev.Record.Value, ev.Record.Headers = nil, nil, hs
	ev.Minimal = true
}

// truncation lists what a dead-letter record lost, for dlq-truncated: the
// names of headers whose values were cut, "original-topic", and "key",
// "value" or "headers" for what was left out.
type truncation struct {
	items []string
}

func (t *truncation) add(item string) {
	for _, have := range t.items {
		if have == item {
			return
		}
	}
	t.items = append(t.items, item)
}

// value is the dlq-truncated header's value, nil when nothing was cut; at
// most maxTruncatedBytes, ending in ",..." when the list was longer.
func (t *truncation) value() []byte {
	if len(t.items) == 0 {
		return nil
	}
	v := strings.Join(t.items, ",")
	if len(v) > maxTruncatedBytes {
		v = string(contract.Cut([]byte(v), maxTruncatedBytes-4)) + ",..."
	}
	return []byte(v)
}

// MessageID is ev's message ID as text, empty when it has none.
func (ev *Event) MessageID() string {
	if ev.ID == [16]byte{} {
		return ""
	}
	return ev.ID.String()
}
