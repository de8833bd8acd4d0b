package inbox

import "time"

// KafkaRecord is a Kafka record as any client delivers it (franz-go, sarama,
// confluent-kafka-go, kafka-go), for callers that run their own consumer
// loop and call Process, ProcessTx or ProcessExternal per record.
type KafkaRecord struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Time      time.Time
	// Headers in record order; of repeated keys the last one wins.
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
// record without those headers gives a Message that Process rejects
// (ErrInvalidMessage): dead-letter it.
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
		for _, h := range r.Headers {
			m.Headers[h.Key] = string(h.Value)
		}
		m.ID = m.Headers[HeaderMessageID]
		m.BusinessKey = m.Headers[HeaderBusinessKey]
	}
	return m
}
