package inbox

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrConflict is wrapped by every *ConflictError.
	ErrConflict = errors.New("inbox: conflicting message")
	// ErrInvalidMessage is returned for a message without ID or business key.
	ErrInvalidMessage = errors.New("inbox: invalid message")
	// ErrLeaseLost is returned by ProcessExternal when the handler finished
	// after its lease expired and another delivery took the message over.
	// The external effect used the same idempotency key, so it happened once
	// there; the new owner records the outcome.
	ErrLeaseLost = errors.New("inbox: lease lost to another delivery")
)

// ConflictError describes a conflicting message. It wraps ErrConflict.
type ConflictError struct {
	// MessageID and BusinessKey are those of the delivery.
	MessageID, BusinessKey string
	// StoredMessageID and StoredBusinessKey are those of the row it
	// conflicts with.
	StoredMessageID, StoredBusinessKey string
	// Reason is "message-id reused with another business key" or
	// "payload differs".
	Reason string
}

// Error names both messages and the reason they conflict.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("inbox: conflicting message %s (business key %s) with stored %s (business key %s): %s",
		e.MessageID, e.BusinessKey, e.StoredMessageID, e.StoredBusinessKey, e.Reason)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the inbox dead-letters the message at once
// instead of retrying it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// SQLSTATE codes the inbox acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Retryable reports whether err is transient: a serialization failure
// (40001), a deadlock (40P01), or an error pgconn marks safe to retry. The
// inbox retries such transactions itself (Config.TxRetries); callers of
// ProcessTx may use it to retry theirs.
func Retryable(err error) bool {
	switch sqlState(err) {
	case codeSerializationFailure, codeDeadlockDetected:
		return true
	}
	return pgconn.SafeToRetry(err)
}
