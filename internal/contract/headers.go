package contract

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
// HeaderDLQReason is also the inbox's: the inbox's dead-letter records carry
// it with dlq-error, dlq-consumer, dlq-attempts and dlq-original-* (see
// package inbox).
const (
	HeaderDLQReason     = "dlq-reason"
	HeaderDLQDetail     = "dlq-detail"
	HeaderOriginalTopic = "original-topic"
)

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
