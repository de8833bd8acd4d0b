package inbox

import (
	"time"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// Record headers the relay sets and the inbox reads.
const (
	HeaderMessageID     = contract.HeaderMessageID
	HeaderBusinessKey   = contract.HeaderBusinessKey
	HeaderEventType     = contract.HeaderEventType
	HeaderAggregateType = contract.HeaderAggregateType
	HeaderAggregateID   = contract.HeaderAggregateID
)

// KafkaRecord is a Kafka record as any client delivers it (franz-go, sarama,
// confluent-kafka-go, kafka-go: inboxkafkago.Record converts its messages),
// for callers that run their own consumer loop and call Process, ProcessTx
// or ProcessExternal per record.
type KafkaRecord struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Time      time.Time
	// Headers in record order; of repeated keys the last one wins, except
	// that a repeated contract header makes the record invalid (see
	// RepeatedHeaderError).
	Headers []KafkaHeader
}

// KafkaHeader is one record header. franz-go's kgo.RecordHeader,
// confluent-kafka-go's kafka.Header and kafka-go's kafka.Header convert to
// it with a type conversion (KafkaHeader(h)); sarama's needs
// KafkaHeader{Key: string(h.Key), Value: h.Value}.
type KafkaHeader struct {
	Key   string
	Value []byte
}

// Message returns the Message of r: the message ID and business key from
// the relay's message-id and business-key headers, the payload from the
// value, every header as a string, and where the record came from. A
// record without those headers, or repeating one of the contract's headers
// (message-id, business-key, event-type, aggregate-type, aggregate-id; in
// any case), gives a Message that Process rejects (ErrInvalidMessage):
// dead-letter it.
//
// A record without a message-id header but with ce_id is read as a
// CloudEvent in the binary content mode of the CloudEvents Kafka binding
// (any CloudEvents producer): the message ID is ce_id; the business key is
// the business-key header, else the ce_businesskey extension, else ce_id
// (the event's ID then serves as the key: a redelivery is a duplicate, a
// second event is a second operation); the event type is the event-type
// header, else ce_type. Headers then also holds message-id, business-key
// and (from ce_type) event-type as read, so a handler finds them where the
// relay puts them. A repeated ce_id, ce_businesskey or ce_type makes the
// record invalid as a repeated contract header does.
func (r KafkaRecord) Message() Message {
	m := Message{
		Payload:   r.Value,
		Key:       r.Key,
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Time:      r.Time,
	}
	if len(r.Headers) > 0 {
		m.Headers = make(map[string]string, len(r.Headers))
		names := make([]string, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[h.Key] = string(h.Value)
			names[i] = h.Key
		}
		m.ID = m.Headers[HeaderMessageID]
		m.BusinessKey = m.Headers[HeaderBusinessKey]
		if h := contract.RepeatedReserved(names); h != "" {
			m.invalid = &RepeatedHeaderError{Header: h}
		}
		if _, ours := m.Headers[HeaderMessageID]; !ours {
			m.fromCloudEvent(names)
		}
	}
	return m
}

// fromCloudEvent fills m's keys from the CloudEvents headers of a record
// without a message-id header (see KafkaRecord.Message); names are the
// record's header names.
func (m *Message) fromCloudEvent(names []string) {
	id, ok := m.Headers[contract.HeaderCEID]
	if !ok {
		return
	}
	if h := contract.RepeatedCloudEvents(names); h != "" && m.invalid == nil {
		m.invalid = &RepeatedHeaderError{Header: h}
	}
	m.ID = id
	if m.BusinessKey == "" {
		m.BusinessKey = m.Headers[contract.HeaderCEBusinessKey]
	}
	if m.BusinessKey == "" {
		m.BusinessKey = id
	}
	m.Headers[HeaderMessageID] = m.ID
	m.Headers[HeaderBusinessKey] = m.BusinessKey
	if t, ok := m.Headers[contract.HeaderCEType]; ok {
		if _, set := m.Headers[HeaderEventType]; !set {
			m.Headers[HeaderEventType] = t
		}
	}
}

// RepeatedHeaderError is the error of a record that carries one of the
// contract's headers more than once (ignoring case). It is invalid rather
// than resolved by taking one copy: a forged second message-id or
// business-key would change what the inbox deduplicates on. Process wraps
// it in ErrInvalidMessage; the consumer loop dead-letters the record with
// reason "repeated-header".
type RepeatedHeaderError struct {
	// Header is the repeated header's name.
	Header string
}

// Error names the repeated header.
func (e *RepeatedHeaderError) Error() string {
	return "header " + e.Header + " repeated"
}
