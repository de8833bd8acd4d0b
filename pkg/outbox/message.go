package outbox

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// ErrInvalidMessage is wrapped by every validation error of InsertTx,
// InsertManyTx and EmitTx.
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

// event is m as the contract checks and encodes it.
func (m *Message) event() contract.Event {
	return contract.Event{ID: m.ID, AggregateType: m.AggregateType, AggregateID: m.AggregateID, EventType: m.EventType,
		BusinessKey: m.BusinessKey, Payload: m.Payload, Headers: m.Headers, Topic: m.Topic}
}

// validate checks m (contract.Event.Check); index is the position in a
// batch, or -1.
func (m *Message) validate(rawPayload bool, index int) error {
	ev := m.event()
	err := ev.Check(rawPayload)
	switch {
	case err == nil:
		return nil
	case index >= 0:
		return fmt.Errorf("%w: message %d: %w", ErrInvalidMessage, index, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
}

// headersJSON encodes the headers column as text; nil means SQL NULL.
func (m *Message) headersJSON() (any, error) {
	if len(m.Headers) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m.Headers)
	return string(b), err
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
