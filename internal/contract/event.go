package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Event is one outbox event as the writer checks it and a logical message
// carries it: the columns of an outbox row. The JSON keys are the logical
// message's (see EncodeLogicalMessage); the payload travels base64-encoded,
// so any bytes survive.
type Event struct {
	ID            uuid.UUID         `json:"id"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	EventType     string            `json:"event_type"`
	BusinessKey   string            `json:"business_key"`
	Payload       []byte            `json:"payload"`
	Headers       map[string]string `json:"headers,omitempty"`
	Topic         string            `json:"topic,omitempty"`
}

// Check reports why the relay would not publish e as it is: a required
// field missing, a key breaking CheckKey, a header the relay writes, an
// illegal or reserved topic, a missing payload, or (unless rawPayload) a
// payload that is not JSON. It does not look at the ID.
func (e *Event) Check(rawPayload bool) error {
	switch {
	case e.AggregateType == "":
		return errors.New("aggregate type is required")
	case e.AggregateID == "":
		return errors.New("aggregate ID is required")
	case e.EventType == "":
		return errors.New("event type is required")
	case e.BusinessKey == "":
		return errors.New("business key is required")
	case !utf8.ValidString(e.AggregateID) || strings.IndexByte(e.AggregateID, 0) >= 0:
		return errors.New("aggregate ID is not valid UTF-8 or holds a NUL byte")
	}
	if err := CheckKey("business key", e.BusinessKey); err != nil {
		return err
	}
	for name := range e.Headers {
		if WrittenByRelay(name) {
			return fmt.Errorf("header %s is written by the relay (the relay would dead-letter the message as bad-headers)", Excerpt([]byte(name), 64))
		}
	}
	if e.Topic != "" {
		if err := CheckTopic([]byte(e.Topic)); err != nil {
			return fmt.Errorf("%w (the relay would dead-letter the message as bad-topic)", err)
		}
		if e.Topic == DefaultProgressTopic {
			return fmt.Errorf("topic %s is the progress topic of exactly-once relays, which only the relay writes (the relay would dead-letter the message as bad-topic)", e.Topic)
		}
		if strings.HasPrefix(e.Topic, FleetTopicPrefix) {
			return fmt.Errorf("topic %s is a relay fleet's topic, which only relays use (the relay would dead-letter the message as bad-topic)", e.Topic)
		}
	}
	switch {
	case e.Payload == nil:
		return errors.New("payload is required")
	case !rawPayload && !json.Valid(e.Payload):
		return errors.New("payload is not valid JSON (set Config.RawPayload for a text or bytea payload column)")
	}
	return nil
}
