package inbox

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/redact"
)

var (
	// ErrConflict is wrapped by every *ConflictError.
	ErrConflict = errors.New("inbox: conflicting message")
	// ErrInvalidMessage is returned for a message whose ID or business key
	// breaks the key rules (see MaxKeyBytes).
	ErrInvalidMessage = errors.New("inbox: invalid message")
	// ErrLeaseLost is returned by ProcessExternal when the handler finished
	// after its lease expired and another delivery took the message over.
	// The external effect used the same idempotency key, so it happened once
	// there; the new owner records the outcome.
	ErrLeaseLost = errors.New("inbox: lease lost to another delivery")
	// ErrLeaseExpired is the cause of a two-phase handler's context ending
	// because its lease ran out (see ExtendLease): another delivery may take
	// the message over now.
	ErrLeaseExpired = errors.New("inbox: lease expired")
	// ErrAlreadyDone, returned (or wrapped) by an external handler together
	// with a result reference, says that reconciliation found the effect
	// already made by an earlier attempt: the message is recorded COMPLETED
	// with that reference and Result.Reconciled is set.
	ErrAlreadyDone = errors.New("inbox: effect already done")
)

// ConflictError describes a conflicting message. It wraps ErrConflict.
type ConflictError struct {
	// MessageID and BusinessKey are those of the delivery.
	MessageID, BusinessKey string
	// PayloadHash is the delivery's payload digest (Config.PayloadHash).
	PayloadHash []byte
	// StoredMessageID and StoredBusinessKey are those of the row it
	// conflicts with.
	StoredMessageID, StoredBusinessKey string
	// StoredPayloadHash is the stored row's payload digest.
	StoredPayloadHash []byte
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

// MaxKeyBytes bounds the length in bytes of a message ID and of a business
// key. The key rules, shared with the outbox writer and the relay: non-empty,
// valid UTF-8, no NUL byte, at most MaxKeyBytes bytes. Postgres could not
// store a key that breaks them (invalid text, SQLSTATE 22021, or an index
// entry over the btree limit of about 2.7 kB, 54000), so the inbox refuses it
// before the claim: Process returns ErrInvalidMessage and the consumer loop
// dead-letters the record with reason "invalid-key".
const MaxKeyBytes = contract.MaxKeyBytes

// SQLSTATE codes the inbox acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// isRecordError reports whether err is a database error caused by the
// record's own content (a data exception, class 22, or a program limit,
// class 54, such as an index entry over the btree limit): retrying cannot
// help, so the consumer loop dead-letters the record at the attempt limit
// even when no inbox row could hold the count.
func isRecordError(err error) bool {
	s := sqlState(err)
	return len(s) == 5 && (s[:2] == "22" || s[:2] == "54")
}

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

// MaxErrorText bounds the text of an error kept in last_error, sent in the
// dlq-detail header or logged for a delivery.
const MaxErrorText = 1024

// errText is err's text as Config.ErrorRedactor renders it, bounded to
// MaxErrorText bytes, and as Postgres text can store it (last_error): valid
// UTF-8 without NUL bytes, so a handler error quoting a bad record cannot
// make the failure record itself fail.
func (in *core) errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if in.cfg.ErrorRedactor != nil {
		s = in.cfg.ErrorRedactor(err)
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > MaxErrorText {
		cut := MaxErrorText - 32
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s…(%d bytes in all)", s[:cut], len(s))
	}
	return s
}

// logKey is how a message ID or business key appears in a log line: whole
// with LogFullKeys, else shortened (see redact.Key).
func (in *core) logKey(s string) string {
	if in.cfg.LogFullKeys {
		return s
	}
	return redact.Key(s)
}
