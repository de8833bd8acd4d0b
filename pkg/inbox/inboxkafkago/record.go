package inboxkafkago

import (
	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Record returns m as the inbox's record type, headers in record order. ok
// is false for a Kafka transaction marker (a control record ending a
// transaction, which kafka-go hands out as a record: no headers, a 4-byte
// key of version 0 and type abort or commit, a 6-byte value of version 0):
// skip it, never process or dead-letter it, and commit its offset.
func Record(m kafka.Message) (rec inbox.KafkaRecord, ok bool) {
	if isTxnMarker(&m) {
		return inbox.KafkaRecord{}, false
	}
	rec = inbox.KafkaRecord{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time}
	if len(m.Headers) > 0 {
		rec.Headers = make([]inbox.KafkaHeader, len(m.Headers))
		for i, h := range m.Headers {
			rec.Headers[i] = inbox.KafkaHeader(h)
		}
	}
	return rec, true
}

// isTxnMarker reports whether m has the shape of a transaction marker.
func isTxnMarker(m *kafka.Message) bool {
	return len(m.Headers) == 0 && len(m.Key) == 4 && m.Key[0] == 0 && m.Key[1] == 0 && m.Key[2] == 0 && m.Key[3] <= 1 &&
		len(m.Value) == 6 && m.Value[0] == 0 && m.Value[1] == 0
}
