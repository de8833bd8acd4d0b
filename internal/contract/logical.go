package contract

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// LogicalMessagePrefix is the prefix of the logical decoding messages that
// the outbox writer emits (pg_logical_emit_message) and the relay
// publishes. The relay ignores messages with other prefixes.
const LogicalMessagePrefix = "pgoutbox"

// logicalMessageVersion is the "v" field of the content; the relay rejects
// (dead-letters) versions it does not know.
const logicalMessageVersion = 1

// logicalMessage is the content of a pgoutbox logical message: versioned
// JSON.
type logicalMessage struct {
	Version int `json:"v"`
	Event
}

// ErrBadLogicalMessage is wrapped by every error of DecodeLogicalMessage.
var ErrBadLogicalMessage = errors.New("bad pgoutbox logical message")

// EncodeLogicalMessage returns the content of the logical message that
// carries e. The writer checks e first; the encoding checks nothing.
func EncodeLogicalMessage(e *Event) ([]byte, error) {
	return json.Marshal(logicalMessage{Version: logicalMessageVersion, Event: *e})
}

// DecodeLogicalMessage parses the content of a logical message written by
// EncodeLogicalMessage. It checks the fields a record needs (Event.Check
// with a raw payload), not the payload's JSON validity. On an error after
// parsing it returns what it read, for the dead-letter record.
func DecodeLogicalMessage(content []byte) (Event, error) {
	var lm logicalMessage
	if err := json.Unmarshal(content, &lm); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadLogicalMessage, err)
	}
	if lm.Version != logicalMessageVersion {
		return Event{}, fmt.Errorf("%w: version %d, want %d", ErrBadLogicalMessage, lm.Version, logicalMessageVersion)
	}
	e := lm.Event
	if e.ID == uuid.Nil {
		return e, fmt.Errorf("%w: message ID is missing", ErrBadLogicalMessage)
	}
	if err := e.Check(true); err != nil {
		return e, fmt.Errorf("%w: %w", ErrBadLogicalMessage, err)
	}
	return e, nil
}
