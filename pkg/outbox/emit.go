package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// LogicalMessagePrefix is the prefix of the logical decoding messages that
// EmitTx writes and the relay publishes. Messages with other prefixes are
// ignored by the relay.
const LogicalMessagePrefix = "pgoutbox"

// logicalMessageVersion is the "v" field of the content; the relay rejects
// (dead-letters) versions it does not know.
const logicalMessageVersion = 1

// logicalMessage is the content of a pgoutbox logical message: JSON, with
// the payload base64-encoded so any bytes survive.
type logicalMessage struct {
	Version       int               `json:"v"`
	ID            uuid.UUID         `json:"id"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	EventType     string            `json:"event_type"`
	BusinessKey   string            `json:"business_key"`
	Payload       []byte            `json:"payload"`
	Headers       map[string]string `json:"headers,omitempty"`
	Topic         string            `json:"topic,omitempty"`
}

// EmitTx writes msg into the WAL of tx as a transactional logical decoding
// message (pg_logical_emit_message with prefix "pgoutbox") instead of a
// table row, and returns its message ID (generated when msg.ID is zero).
// The relay publishes it exactly like a row, in commit order, when tx
// commits; a rolled-back tx publishes nothing. No table is written, so
// nothing needs pruning, but the message exists only in the WAL: it
// reaches Kafka only through a slot that was created before tx committed.
//
// msg is validated like InsertTx validates it (JSON payload unless
// Config.RawPayload).
func (w *Writer) EmitTx(ctx context.Context, tx pgx.Tx, msg Message) (uuid.UUID, error) {
	w.injectTrace(ctx, &msg)
	content, err := w.encodeLogical(&msg)
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, $2::bytea)`, LogicalMessagePrefix, content); err != nil {
		return uuid.Nil, fmt.Errorf("outbox: emit logical message: %w", err)
	}
	return msg.ID, nil
}

func (w *Writer) encodeLogical(m *Message) ([]byte, error) {
	if err := w.prepare(m, -1); err != nil {
		return nil, err
	}
	return json.Marshal(logicalMessage{
		Version: logicalMessageVersion, ID: m.ID, AggregateType: m.AggregateType, AggregateID: m.AggregateID,
		EventType: m.EventType, BusinessKey: m.BusinessKey, Payload: m.Payload, Headers: m.Headers, Topic: m.Topic,
	})
}

// ErrBadLogicalMessage is wrapped by DecodeLogicalMessage errors.
var ErrBadLogicalMessage = errors.New("bad pgoutbox logical message")

// DecodeLogicalMessage parses the content of a logical message written by
// EmitTx. The relay uses it; it checks the fields a record needs, not the
// payload's JSON validity.
func DecodeLogicalMessage(content []byte) (Message, error) {
	var lm logicalMessage
	if err := json.Unmarshal(content, &lm); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrBadLogicalMessage, err)
	}
	if lm.Version != logicalMessageVersion {
		return Message{}, fmt.Errorf("%w: version %d, want %d", ErrBadLogicalMessage, lm.Version, logicalMessageVersion)
	}
	m := Message{
		ID: lm.ID, AggregateType: lm.AggregateType, AggregateID: lm.AggregateID, EventType: lm.EventType,
		BusinessKey: lm.BusinessKey, Payload: lm.Payload, Headers: lm.Headers, Topic: lm.Topic,
	}
	if m.ID == uuid.Nil {
		return m, fmt.Errorf("%w: message ID is missing", ErrBadLogicalMessage)
	}
	if err := m.validate(true, -1); err != nil {
		return m, fmt.Errorf("%w: %w", ErrBadLogicalMessage, err)
	}
	return m, nil
}
