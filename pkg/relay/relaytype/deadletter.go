package relaytype

// Reasons of invalid events: the dlq-reason header and the reason label of
// pgoutbox_relay_invalid_events_total.
const (
	ReasonNullColumn       = "null-column"       // NULL in a required column
	ReasonBadValue         = "bad-value"         // a value that does not parse (message ID, bytea)
	ReasonTooLarge         = "too-large"         // record over MaxMessageBytes or the broker's limit
	ReasonUnsupportedType  = "unsupported-type"  // a column value in a form the relay cannot read
	ReasonBadHeaders       = "bad-headers"       // headers not a JSON object, or naming a header the relay writes
	ReasonBadTopic         = "bad-topic"         // not a legal Kafka topic name, the dead-letter topic, or not allowed
	ReasonBadMessage       = "bad-message"       // a pgoutbox logical message that does not parse
	ReasonKafkaRejected    = "kafka-rejected"    // a record the brokers refuse for good (policy, invalid record...)
	ReasonBadColumns       = "bad-columns"       // a row of a table layout (relation message) the relay cannot read
	ReasonNotOutbox        = "not-outbox"        // a row of a table the publication publishes that is not the outbox
	ReasonInvalidKey       = "invalid-key"       // a business key that breaks the key rules (internal/contract)
	ReasonTopicUnavailable = "topic-unavailable" // a topic missing or not writable past TopicUnavailableGrace
)

// Bounds of a dead-letter record (docs/kafka.md lists them). A row's values
// are untrusted: whatever they hold, its dead-letter record fits, so no row
// can stop the relay.
const (
	// MaxDeadLetterHeaderBytes bounds the value of every header a
	// dead-letter record carries over from its event (business-key,
	// aggregate-id, the row's own headers...): a longer value is cut to it
	// and named in dlq-truncated. original-topic is cut to Kafka's longest
	// topic name (249 bytes), dlq-detail to 1,024 bytes.
	MaxDeadLetterHeaderBytes = 4096
	// MaxDeadLetterHeaderNameBytes bounds the name of a header a
	// dead-letter record carries over: a header with a longer name is left
	// out ("headers" in dlq-truncated).
	MaxDeadLetterHeaderNameBytes = 256
)

// OtherTopicLabel is the topic label of pgoutbox_relay_events_published_total
// that counts the records of every topic past the first 1,000 the relay
// published to. It cannot be a topic's name: Kafka refuses parentheses.
const OtherTopicLabel = "(other)"
