package relayerr

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Run, Setup, Status and Teardown wrap them with the
// details; use errors.Is.
var (
	// ErrConfig means the Config is invalid.
	ErrConfig = errors.New("relay: invalid configuration")
	// ErrSlotMissing means the slot does not exist and NoCreate is set.
	ErrSlotMissing = errors.New("relay: replication slot does not exist")
	// ErrPublicationMissing means the publication does not exist and
	// NoCreate is set.
	ErrPublicationMissing = errors.New("relay: publication does not exist")
	// ErrPublicationMismatch means the publication exists but does not
	// publish exactly the outbox table's inserts: the table or inserts
	// missing, a row filter or column list, other tables, or partitions
	// published under their own names.
	ErrPublicationMismatch = errors.New("relay: publication does not match the outbox table")
	// ErrSlotMismatch means a slot of that name exists with another output
	// plugin or in another database.
	ErrSlotMismatch = errors.New("relay: replication slot is not a pgoutput slot of this database")
	// ErrSlotActive means another process streams the slot.
	ErrSlotActive = errors.New("relay: replication slot is active")
	// ErrPublicationInUse means Teardown would drop a publication that
	// another slot streams or relays this outbox with.
	ErrPublicationInUse = errors.New("relay: publication is used by another slot")
	// ErrSlotInvalidated means the server removed WAL the slot still
	// needed (wal_status lost): events may be lost, the slot must be
	// recreated by an operator.
	ErrSlotInvalidated = errors.New("relay: replication slot invalidated (required WAL removed)")
	// ErrGap is wrapped by the GapError that stops Run when the slot
	// cannot be trusted to resume where the relay left off: events may
	// have been skipped (see Gaps in internal/slotstate).
	ErrGap = errors.New("relay: gap in the replication stream")
	// ErrStateMissing means the relay's state table does not exist (see
	// StateTableName) and NoCreate is set.
	ErrStateMissing = errors.New("relay: relay state table does not exist")
	// ErrTableMissing means the outbox table does not exist.
	ErrTableMissing = errors.New("relay: outbox table does not exist")
	// ErrTableColumns means the outbox table lacks a column the relay
	// needs or has one of an unsupported type.
	ErrTableColumns = errors.New("relay: outbox table columns unusable")
	// ErrInvalidEvent is wrapped by the InvalidEventError that stops Run
	// when Config.OnInvalid is InvalidStop.
	ErrInvalidEvent = errors.New("relay: invalid outbox event")
	// ErrDeadLetter means Kafka refused a record of the dead-letter topic
	// for good (the topic does not exist, is not writable, or rejects
	// the record), so an invalid event could not be dead-lettered.
	ErrDeadLetter = errors.New("relay: kafka refused a dead-letter record")
	// ErrKafkaAuth means the brokers refused the relay's credentials or
	// permissions.
	ErrKafkaAuth = errors.New("relay: kafka refused authentication or authorization")
	// ErrFenced means, in exactly-once mode, that the brokers refused the
	// relay's transactional producer for its epoch: a newer relay of the
	// slot initialised the slot's transactional ID, or the brokers aborted
	// the relay's open transaction (it outlasted the transaction
	// timeout). Nothing of that transaction is confirmed; the session ends
	// and the next one initialises the producer again, or waits as a
	// standby when another relay holds the slot. It is not permanent.
	ErrFenced = errors.New("relay: exactly-once: kafka transaction fenced (a newer relay of the slot, or a transaction timeout)")
	// ErrTopicUnavailable means writes to a topic failed because it does
	// not exist or the relay may not write it, for longer than
	// Config.TopicUnavailableGrace.
	ErrTopicUnavailable = errors.New("relay: kafka topic unavailable")
)

// InvalidEventError names an event the relay could not publish, returned by
// Run when Config.OnInvalid is InvalidStop.
type InvalidEventError struct {
	// MessageID is the event's message ID, or uuid.Nil when it has none.
	MessageID uuid.UUID
	// Reason is the invalid_events_total reason, for example "null-column".
	Reason string
	// Detail says what exactly is wrong.
	Detail string
}

// Error names the message, the reason and the detail.
func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("relay: invalid outbox event %s (%s): %s", e.MessageID, e.Reason, e.Detail)
}

// Unwrap returns ErrInvalidEvent.
func (e *InvalidEventError) Unwrap() error { return ErrInvalidEvent }

// permanentError marks an error that reconnecting cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err is one that retrying cannot fix: bad
// configuration, refused credentials or privileges, a missing or
// invalidated slot, unusable table columns, an invalid event under
// InvalidStop.
func IsPermanent(err error) bool {
	var p *permanentError
	if errors.As(err, &p) {
		return true
	}
	for _, s := range []error{ErrConfig, ErrSlotMissing, ErrPublicationMissing, ErrPublicationMismatch, ErrSlotMismatch,
		ErrSlotInvalidated, ErrGap, ErrStateMissing, ErrTableMissing, ErrTableColumns, ErrInvalidEvent, ErrKafkaAuth, ErrDeadLetter} {
		if errors.Is(err, s) {
			return true
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28000", // invalid_authorization_specification (also pg_hba rejection)
			"28P01", // invalid_password
			"42501", // insufficient_privilege
			"3D000", // invalid_catalog_name: database does not exist
			"42704", // undefined_object: slot does not exist
			"42P01", // undefined_table
			"55000", // object_not_in_prerequisite_state: slot invalidated, wal_level too low
			"0A000": // feature_not_supported
			return true
		}
	}
	return Classify(err) == Fatal
}

// Verdict is what the sink does about a Kafka error (see Classify).
type Verdict int

const (
	// Retryable: the broker or the network; retry with backoff, forever.
	// (The producer retries these itself; a record fails with one only
	// when the producer gave up on it.)
	Retryable Verdict = iota
	// OwnFaultUnlessTransient: most likely the record's own fault, but it
	// may pass; dead-letter it when it persists (internal/sink: for rejectAttempts
	// attempts and at least rejectAfter).
	OwnFaultUnlessTransient
	// OwnFault: the broker will never accept the record; dead-letter it.
	OwnFault
	// TopicUnavailable: the record's topic does not exist or the relay
	// may not write it: the operator's to fix (a topic provisioned late,
	// a missing ACL). Retry with backoff for TopicUnavailableGrace, then
	// stop; never dead-letter.
	TopicUnavailable
	// fatal: the relay's credentials or rights, or a newer relay of the
	// slot (fenced); stop.
	Fatal
)

// kafkaVerdicts is the one table of Kafka errors the relay acts on; every
// other error is retryable.
var kafkaVerdicts = map[*kerr.Error]Verdict{
	kerr.SaslAuthenticationFailed:           Fatal,
	kerr.ClusterAuthorizationFailed:         Fatal,
	kerr.UnsupportedSaslMechanism:           Fatal,
	kerr.IllegalSaslState:                   Fatal,
	kerr.TransactionalIDAuthorizationFailed: Fatal,
	kerr.ProducerFenced:                     Fatal,
	kerr.UnknownTopicOrPartition:            TopicUnavailable,
	kerr.TopicAuthorizationFailed:           TopicUnavailable,
	kerr.CorruptMessage:                     OwnFaultUnlessTransient,
	kerr.MessageTooLarge:                    OwnFault,
	kerr.RecordListTooLarge:                 OwnFault,
	kerr.InvalidTopicException:              OwnFault,
	kerr.InvalidTimestamp:                   OwnFault,
	kerr.UnsupportedForMessageFormat:        OwnFault,
	kerr.PolicyViolation:                    OwnFault,
	kerr.InvalidRecord:                      OwnFault,
}

// Classify says what err, the failure of a Kafka write, calls for.
func Classify(err error) Verdict {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return Retryable
	}
	return kafkaVerdicts[ke]
}
