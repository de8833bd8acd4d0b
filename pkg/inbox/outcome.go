package inbox

import "fmt"

// Outcome is what happened to one delivery. The zero value is invalid.
type Outcome int

const (
	// Processed: the handler ran and its effects committed with the
	// COMPLETED record.
	Processed Outcome = iota + 1
	// Duplicate: the message (same ID, or another ID with the same business
	// key and payload) was already processed; the handler did not run.
	Duplicate
	// Conflict: the message ID was seen with another business key or
	// payload, or the business key with another payload. Returned with an
	// error wrapping ErrConflict under ConflictPolicyStop.
	Conflict
	// Busy: another worker holds a live PROCESSING lease; try again later.
	Busy
	// Retry: the handler failed; the attempt was recorded and the message
	// should be delivered again after Config.Backoff.
	Retry
	// DeadLettered: the message is FAILED_FINAL (attempt limit, permanent
	// error, or a conflict under ConflictPolicyDeadLetter); the handler did not
	// run or will not run again. Acknowledge it after sending it to the
	// dead-letter topic.
	DeadLettered
)

var outcomeNames = [...]string{
	Processed:    "processed",
	Duplicate:    "duplicate",
	Conflict:     "conflict",
	Busy:         "busy",
	Retry:        "retry",
	DeadLettered: "dead-lettered",
}

// String returns the lower-case name used in logs and metric labels.
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Acked reports whether the delivery is settled and its offset may be
// committed: Processed, Duplicate and DeadLettered. Conflict, Busy and Retry
// are not.
func (o Outcome) Acked() bool {
	return o == Processed || o == Duplicate || o == DeadLettered
}

// Dead-letter reasons: the dlq-reason header and the reason label of
// pgoutbox_inbox_dead_lettered_total. They are spelled with hyphens, like
// the relay's (relaytype.ReasonInvalidKey is "invalid-key" at both hops).
const (
	ReasonMaxAttempts    = "max-attempts"
	ReasonPermanent      = "permanent"
	ReasonConflict       = "conflict"
	ReasonMissingHeaders = "missing-headers"
	// ReasonInvalidKey: the message ID or business key breaks the key rules
	// (see MaxKeyBytes); the record never reached the table.
	ReasonInvalidKey = "invalid-key"
	// ReasonRepeatedHeader: the record carries a contract header
	// (message-id, business-key, event-type, aggregate-type, aggregate-id)
	// more than once (see RepeatedHeaderError); it never reached the table.
	ReasonRepeatedHeader = "repeated-header"
	// ReasonFailedFinal marks a redelivery of a message that was already
	// FAILED_FINAL.
	ReasonFailedFinal = "failed-final"
)

// Result describes one delivery.
type Result struct {
	// Outcome is what happened.
	Outcome Outcome
	// Status is the row's status after the delivery ("" when no row was
	// touched).
	Status Status
	// Attempts is the row's attempt count after the delivery.
	Attempts int
	// ResultRef is the handler's result reference: the new one for
	// Processed, the stored one for Duplicate.
	ResultRef string
	// Reason is the dead-letter reason for DeadLettered (one of the Reason
	// constants) and the conflict reason for Conflict.
	Reason string
	// Err is the handler's error for Retry and DeadLettered, and the
	// conflict for Conflict.
	Err error
	// IdempotencyKey is the key the two-phase handler was called with.
	IdempotencyKey string
	// Reconciled is set for Processed when the two-phase handler returned
	// ErrAlreadyDone: an earlier attempt had made the effect.
	Reconciled bool

	from           Status // the row's status before the delivery, for logs
	deadLetterSent bool   // the dead-letter record was written before
}
