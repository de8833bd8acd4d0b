package publish

// Verdict is what a broker's answer about one record calls for. The
// sink's loop acts on it (retries, dead letters, ending the session); a
// publisher maps its broker's errors to it in one table (Kafka:
// relayerr.Classify).
type Verdict uint8

const (
	// Confirmed: the broker has the record (see Publisher.Write).
	Confirmed Verdict = iota
	// Retry: the broker or the network failed; the record is written
	// again after a backoff, forever.
	Retry
	// RefusedUnlessTransient: most likely the record's own fault, but the
	// broker's error may pass (Kafka's CORRUPT_MESSAGE); the loop
	// dead-letters the record once it is refused for long enough.
	RefusedUnlessTransient
	// Refused: the broker will never accept the record for its own sake
	// (too large, an illegal destination, a policy); the loop dead-letters
	// it (or stops the relay, as configured). Reason says why.
	Refused
	// TopicUnavailable: the destination does not exist, or the relay may
	// not write it: the operator's to fix. The loop retries for the topic
	// unavailable grace, then dead-letters (or stops). Reason says which.
	TopicUnavailable
	// Fatal: the relay cannot write at all (refused credentials or
	// rights); the relay stops.
	Fatal
	// Fenced: a newer session of the identity fenced this one
	// (Transactional); the session ends without committing.
	Fenced
)

// Reasons a publisher gives in Outcome.Reason.
const (
	// ReasonTooLarge qualifies Refused: the broker refused the record as
	// too large (the dead letter then goes without its value).
	ReasonTooLarge = "too-large"
	// ReasonUnknownTopic and ReasonNotAuthorized qualify
	// TopicUnavailable: the destination does not exist, or the relay may
	// not write it (the topic_unavailable metric's reason label).
	ReasonUnknownTopic  = "unknown-topic"
	ReasonNotAuthorized = "not-authorized"
)

// Outcome is the broker's answer about one record of a Write.
type Outcome struct {
	Verdict Verdict
	// Reason qualifies the verdict (the Reason constants); empty when
	// there is nothing to add.
	Reason string
	// Err is the broker's error, for logs and dead-letter details; nil
	// when Confirmed.
	Err error
	// Place is where the broker stored a confirmed record, for tracing.
	Place
}

// Place is where a broker stored a record, for the brokers that number
// them so (Kafka: a partition and an offset in it); zero otherwise.
type Place struct {
	Partition int32
	Offset    int64
}
