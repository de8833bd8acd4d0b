package relayerr

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"github.com/twmb/franz-go/pkg/kerr"
)

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
	for _, s := range []error{relaytype.ErrConfig, relaytype.ErrSlotMissing, relaytype.ErrPublicationMissing, relaytype.ErrPublicationMismatch, relaytype.ErrSlotMismatch,
		relaytype.ErrSlotInvalidated, relaytype.ErrGap, relaytype.ErrStateMissing, relaytype.ErrTableMissing, relaytype.ErrTableColumns, relaytype.ErrInvalidEvent, relaytype.ErrKafkaAuth, relaytype.ErrDeadLetter} {
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
