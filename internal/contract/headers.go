package contract

import "strings"

// Record headers the relay sets on every record from an outbox row, and the
// inbox reads. The row's own headers object cannot override them.
const (
	HeaderMessageID     = "message-id"
	HeaderBusinessKey   = "business-key"
	HeaderEventType     = "event-type"
	HeaderAggregateType = "aggregate-type"
	HeaderAggregateID   = "aggregate-id"
)

// W3C trace context headers: the outbox writer injects them into a row's
// headers, the relay passes them through, the inbox continues the trace.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// Headers of the relay's dead-letter records, besides the original ones.
// HeaderDLQReason and HeaderDLQDetail (the text saying why) are also the
// inbox's: the inbox's dead-letter records carry them with dlq-consumer,
// dlq-attempts and dlq-original-* (see package inbox). HeaderDLQTruncated lists what the relay cut or left out of
// a dead-letter record to keep it within its bounds.
const (
	HeaderDLQReason     = "dlq-reason"
	HeaderDLQDetail     = "dlq-detail"
	HeaderDLQTruncated  = "dlq-truncated"
	HeaderOriginalTopic = "original-topic"
)

// HeaderRelayInstance carries the relay's instance ID (relay.Config.InstanceID).
const HeaderRelayInstance = "relay-instance"

// HeaderProgress marks a progress record of an exactly-once relay; its value
// is the record's format version. Only the relay writes it (a row may not
// name it), so a record under a slot's progress key without it was not
// written by a relay and is never trusted.
const HeaderProgress = "pgoutbox-progress"

// dlqPrefix starts the name of every dead-letter header, the relay's and the
// inbox's.
const dlqPrefix = "dlq-"

// DeadLetterHeader reports whether name is a dead-letter header (dlq-*,
// the relay's and the inbox's), in any case: a dead-letter writer drops
// every such header of the record it dead-letters, so a producer's
// "DLQ-Reason" cannot pose as its own to a reader that ignores case.
func DeadLetterHeader(name string) bool {
	return len(name) >= len(dlqPrefix) && strings.EqualFold(name[:len(dlqPrefix)], dlqPrefix)
}

// Reserved reports whether name is one of the headers the relay sets from
// the row's columns (HeaderMessageID and the others), which the row's
// headers object cannot override.
func Reserved(name string) bool {
	switch name {
	case HeaderMessageID, HeaderBusinessKey, HeaderEventType, HeaderAggregateType, HeaderAggregateID:
		return true
	}
	return false
}

// WrittenByRelay reports whether name is a header the relay writes itself,
// which a row's headers object may not name: the Reserved headers,
// original-topic, relay-instance, pgoutbox-progress and every dlq-* name. Case is ignored, so
// that "Message-ID" cannot pose as message-id to a reader that ignores it.
// traceparent and tracestate are not: the writer puts them in the row and
// the relay passes them through.
func WrittenByRelay(name string) bool {
	if DeadLetterHeader(name) {
		return true
	}
	for _, h := range [...]string{HeaderMessageID, HeaderBusinessKey, HeaderEventType, HeaderAggregateType, HeaderAggregateID,
		HeaderOriginalTopic, HeaderRelayInstance, HeaderProgress} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
