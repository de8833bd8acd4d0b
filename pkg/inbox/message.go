package inbox

import (
	"crypto/sha256"
	"time"
)

// Message is one delivery to deduplicate. ID and BusinessKey are required;
// the consumer loop fills every field from the Kafka record.
type Message struct {
	// ID is the message ID (the relay's message-id header), stable across
	// redeliveries and re-publishes. It is a string, where outbox.Message.ID
	// is a uuid.UUID: the outbox generates its IDs and the relay sends them
	// as text ("0193a0b4-7c1e-7d3a-..."), while the inbox takes the header of
	// any producer, whose IDs need not be UUIDs. Both follow the key rules
	// (see MaxKeyBytes). Compare an outbox ID with msg.ID ==
	// outboxID.String().
	ID string
	// BusinessKey is the idempotency key of the business operation (the
	// business-key header). A second message ID with the same key and payload
	// is a duplicate.
	BusinessKey string
	// Payload is the record value; its digest (Config.PayloadHash) tells
	// duplicates from conflicts.
	Payload []byte
	// Key is the record key (the aggregate ID). Not stored.
	Key []byte
	// Headers are the record headers. Not stored.
	Headers map[string]string
	// Topic, Partition and Offset locate the delivery, for diagnosis.
	Topic     string
	Partition int
	Offset    int64
	// Time is the record timestamp; when set, the age of the message at
	// processing time is observed in pgoutbox_inbox_message_age_seconds.
	Time time.Time

	// invalid is why the record this Message came from breaks the
	// contract beyond its keys (KafkaRecord.Message sets it).
	invalid error
}

// SHA256Payload is the default Config.PayloadHash: the sha256 of the whole
// payload.
func SHA256Payload(msg *Message) []byte {
	h := sha256.Sum256(msg.Payload)
	return h[:]
}

// hash is msg's payload digest under Config.PayloadHash.
func (in *core) hash(msg *Message) []byte {
	return in.cfg.PayloadHash(msg)
}
