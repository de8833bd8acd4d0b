package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// ErrInvalidMessage is wrapped by every validation error of InsertTx,
// InsertManyTx and EmitTx (and their database/sql variants).
var ErrInvalidMessage = errors.New("invalid outbox message")

// Message is one event to publish. It maps one-to-one to an outbox row.
type Message struct {
	// ID is the message ID, stable across re-publishes. A zero ID is replaced
	// by a new UUIDv7. It reaches consumers as the message-id header in its
	// canonical text form, which is why inbox.Message.ID is a string (see
	// there).
	ID uuid.UUID
	// AggregateType routes the topic (default template outbox.{aggregate_type}).
	// Required.
	AggregateType string
	// AggregateID is the Kafka key: one aggregate, one partition, commit order.
	// Required.
	AggregateID string
	// EventType names the event, for example "payment.completed". Required.
	EventType string
	// BusinessKey is the idempotency key of the business operation (for
	// example a payment request ID). Required: non-empty, valid UTF-8, no
	// NUL byte, at most 1024 bytes (the key rules the relay and the inbox
	// apply too; a longer key could not be claimed by an inbox).
	BusinessKey string
	// Payload is the record value. It must be valid JSON unless the writer
	// was configured with RawPayload.
	Payload []byte
	// Headers are extra Kafka headers (trace context, correlation ID). They
	// may not name a header the relay writes (message-id, business-key,
	// event-type, aggregate-type, aggregate-id, original-topic,
	// relay-instance, dlq-*, in any case): the writer refuses such a
	// message, and the relay dead-letters a row that holds one anyway
	// (reason bad-headers). Optional.
	Headers map[string]string
	// Topic overrides the relay's topic template for this message. It must
	// be a legal Kafka topic name (at most 249 bytes of a-z, A-Z, 0-9, '.',
	// '_' and '-'), and not the relay's progress topic (pgoutbox.progress:
	// the relay also dead-letters a row routed to its dead-letter topic or
	// to a progress topic configured otherwise). Optional.
	Topic string
}

// validate checks m; index is the position in a batch, or -1.
func (m *Message) validate(rawPayload bool, index int) error {
	fail := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if index >= 0 {
			msg = fmt.Sprintf("message %d: %s", index, msg)
		}
		return fmt.Errorf("%w: %s", ErrInvalidMessage, msg)
	}
	switch {
	case m.AggregateType == "":
		return fail("aggregate type is required")
	case m.AggregateID == "":
		return fail("aggregate ID is required")
	case m.EventType == "":
		return fail("event type is required")
	case m.BusinessKey == "":
		return fail("business key is required")
	case !utf8.ValidString(m.AggregateID) || strings.IndexByte(m.AggregateID, 0) >= 0:
		return fail("aggregate ID is not valid UTF-8 or holds a NUL byte")
	}
	if err := contract.CheckKey("business key", m.BusinessKey); err != nil {
		return fail("%v", err)
	}
	for name := range m.Headers {
		if contract.WrittenByRelay(name) {
			return fail("header %s is written by the relay (the relay would dead-letter the message as bad-headers)", contract.Excerpt([]byte(name), 64))
		}
	}
	if m.Topic != "" {
		if err := contract.CheckTopic([]byte(m.Topic)); err != nil {
			return fail("%v (the relay would dead-letter the message as bad-topic)", err)
		}
		if m.Topic == contract.DefaultProgressTopic {
			return fail("topic %s is the progress topic of exactly-once relays, which only the relay writes (the relay would dead-letter the message as bad-topic)", m.Topic)
		}
	}
	switch {
	case m.Payload == nil:
		return fail("payload is required")
	case !rawPayload && !json.Valid(m.Payload):
		return fail("payload is not valid JSON (set Config.RawPayload for a text or bytea payload column)")
	}
	return nil
}

// headersJSON encodes the headers column; nil means SQL NULL.
func (m *Message) headersJSON() ([]byte, error) {
	if len(m.Headers) == 0 {
		return nil, nil
	}
	return json.Marshal(m.Headers)
}

// nullable maps "" to SQL NULL.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
