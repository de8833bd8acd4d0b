package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// TxHandler does the business work of msg inside tx, the transaction of
// the claim, and returns an optional result reference (an order ID, a
// payment ID) stored with the COMPLETED record. TTx is the driver's
// transaction type: pgx.Tx (Pgx) or *sql.Tx (SQL). Returning an error rolls
// its writes back; wrap it with Permanent to dead-letter the message at
// once. It must not commit or roll back tx: the inbox does, with the claim.
// The same handler serves Process, ProcessTx and inboxkafka.Config.Handler.
type TxHandler[TTx any] func(ctx context.Context, tx TTx, msg Message) (resultRef string, err error)

// validate applies the key rules (see MaxKeyBytes) to the message ID and the
// business key before anything reaches the database.
func (m *Message) validate() error {
	if m.invalid != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, m.invalid)
	}
	if err := contract.CheckKey("message ID", m.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err := contract.CheckKey("business key", m.BusinessKey); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	return nil
}

// Process handles msg in its own transaction on the driver's database: the
// claim is the first statement, then handler runs with the transaction, then
// the row is marked COMPLETED and everything commits together. A duplicate
// answers Duplicate without running handler. A handler error rolls the
// transaction back and records the attempt in a separate short transaction:
// the outcome is Retry, or DeadLettered at Config.MaxAttempts or for a
// Permanent error.
// Serialization failures and deadlocks are retried transparently, running
// handler again, up to Config.TxRetries times; when they persist, or the
// completion or the commit fails after the claim, the failure is recorded as
// an attempt like a handler error, so MaxAttempts applies.
//
// The returned error is non-nil only when the outcome is unknown (the
// database failed; deliver the message again) or for a Conflict under
// ConflictPolicyStop (wrapping ErrConflict). A nil error is not a success:
// Retry and Busy must be delivered again, and a DeadLettered message must
// be written to a dead-letter topic. A consumer loop of your own commits a
// record's offset only when Result.Outcome.Acked(), after writing the dead
// letter: DeadLetterWriter.Settle does both checks.
func (in *Inbox[TTx]) Process(ctx context.Context, msg Message, handler TxHandler[TTx]) (Result, error) {
	if handler == nil {
		return Result{}, errNilHandler
	}
	return in.process(ctx, msg, handler, false)
}

// process is Process; mark first counts the attempt in its own transaction
// (markAttempt), so that a handler that kills the process every time ends
// FAILED_FINAL after MaxAttempts deliveries instead of being retried forever.
func (in *Inbox[TTx]) process(ctx context.Context, msg Message, handler TxHandler[TTx], mark bool) (Result, error) {
	return in.deliver(ctx, msg, func(msg *Message) (Result, error) {
		hash := in.hash(msg)
		marked := false
		if mark {
			var final *Result
			var err error
			if marked, final, err = in.markAttempt(ctx, msg, hash); final != nil {
				return *final, err
			} else if err != nil {
				return Result{}, err
			}
		}
		for try := 0; ; try++ {
			res, err := in.processOnce(ctx, msg, hash, handler, marked, try >= in.cfg.TxRetries)
			if err == nil || !isTxRetry(err) || try >= in.cfg.TxRetries {
				return res, err
			}
			in.log.Debug("inbox: transaction retried", "message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey),
				"reason", sqlState(err), "try", try+1)
		}
	})
}

func isTxRetry(err error) bool {
	s := sqlState(err)
	return s == codeSerializationFailure || s == codeDeadlockDetected
}

// processOnce runs one transaction of Process. A serialization failure or
// deadlock after the claim is returned for a retry, unless lastTry: then it
// is recorded as a failed attempt, as is any other failure after the claim.
func (in *Inbox[TTx]) processOnce(ctx context.Context, msg *Message, hash []byte, handler TxHandler[TTx], marked, lastTry bool) (Result, error) {
	tx, err := in.db.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("inbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	c, err := in.claimTx(ctx, tx, msg, hash, 0, marked)
	if err != nil {
		return Result{}, err
	}
	if c.done != nil {
		// Nothing was written, or only the verdict on an exhausted row;
		// committing keeps it and releases the row lock.
		if err := tx.Commit(ctx); err != nil {
			return Result{}, fmt.Errorf("inbox: commit %s: %w", msg.ID, err)
		}
		return *c.done, nil
	}
	ref, ferr := in.runTx(ctx, msg, tx, handler)
	if ferr == nil {
		if err := in.completeTx(ctx, tx, c, ref); err != nil {
			ferr = fmt.Errorf("inbox: complete %s: %w", msg.ID, err)
		} else if err := tx.Commit(ctx); err != nil {
			// When the commit did happen after all, the row is COMPLETED
			// and recordFailure leaves it alone.
			ferr = fmt.Errorf("inbox: commit %s: %w", msg.ID, err)
		} else {
			return Result{Outcome: Processed, Status: StatusCompleted, Attempts: c.attempt, ResultRef: ref, from: c.from}, nil
		}
	}
	_ = tx.Rollback(context.WithoutCancel(ctx))
	if isTxRetry(ferr) && !lastTry {
		return Result{}, ferr
	}
	res, err := in.recordFailure(context.WithoutCancel(ctx), msg, hash, c, ferr)
	res.from = c.from
	return res, err
}

// ProcessTx is Process inside the caller's transaction: the claim is the
// next statement of tx and the caller commits. The claim and handler run in
// a savepoint; on a handler error the handler's writes are rolled back and
// the attempt is recorded in tx (FAILED_RETRYABLE or FAILED_FINAL) with a nil
// error, so the caller should still commit to keep that record.
//
// A non-nil error (a serialization failure or deadlock of the handler, a
// database error) leaves tx as it was before the call: the savepoint,
// claim included, is rolled back, so committing cannot record the message
// as handled. Serialization failures are not retried here (the caller owns
// the transaction; see Retryable): the caller should roll tx back and run it
// again.
func (in *Inbox[TTx]) ProcessTx(ctx context.Context, tx TTx, msg Message, handler TxHandler[TTx]) (Result, error) {
	t := in.driver.h.Adopt(tx)
	if t == nil {
		return Result{}, errNilTx
	}
	if handler == nil {
		return Result{}, errNilHandler
	}
	return in.deliver(ctx, msg, func(msg *Message) (Result, error) { return in.processTx(ctx, t, msg, handler) })
}

func (in *Inbox[TTx]) processTx(ctx context.Context, tx dbdriver.Tx, msg *Message, handler TxHandler[TTx]) (Result, error) {
	// The savepoint comes before the claim, so that an error undoes the
	// claim too: a COMPLETED claim left in tx would turn the redelivery into
	// a Duplicate with no effect.
	sp, err := tx.Savepoint(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("inbox: savepoint: %w", err)
	}
	res, err := in.processSavepoint(ctx, sp, msg, handler)
	if err != nil {
		if rerr := sp.Rollback(context.WithoutCancel(ctx)); rerr != nil {
			return Result{}, fmt.Errorf("inbox: roll back to savepoint: %w (%w)", rerr, err)
		}
		return Result{}, err
	}
	if err := sp.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("inbox: release savepoint: %w", err)
	}
	return res, nil
}

// processSavepoint claims msg in sp and runs handler in a nested savepoint.
func (in *Inbox[TTx]) processSavepoint(ctx context.Context, sp dbdriver.Tx, msg *Message, handler TxHandler[TTx]) (Result, error) {
	c, err := in.claimTx(ctx, sp, msg, in.hash(msg), 0, false)
	if err != nil {
		return Result{}, err
	}
	if c.done != nil {
		return *c.done, nil
	}
	hsp, err := sp.Savepoint(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("inbox: savepoint: %w", err)
	}
	ref, herr := in.runTx(ctx, msg, hsp, handler)
	if herr != nil {
		if err := hsp.Rollback(ctx); err != nil {
			return Result{}, fmt.Errorf("inbox: roll back to savepoint: %w (handler: %w)", err, herr)
		}
		if isTxRetry(herr) {
			return Result{}, herr
		}
		status, reason := in.failureStatus(c.attempt, herr)
		if _, err := sp.Exec(ctx, in.queries.failInTx, in.cfg.Consumer, c.rowID, status, in.errText(herr)); err != nil {
			return Result{}, fmt.Errorf("inbox: record failure of %s: %w", msg.ID, err)
		}
		res := failureResult(status, c.attempt, reason, herr)
		res.from = c.from
		return res, nil
	}
	if err := hsp.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("inbox: release savepoint: %w", err)
	}
	if err := in.completeTx(ctx, sp, c, ref); err != nil {
		return Result{}, fmt.Errorf("inbox: complete %s: %w", msg.ID, err)
	}
	return Result{Outcome: Processed, Status: StatusCompleted, Attempts: c.attempt, ResultRef: ref, from: c.from}, nil
}

// completeTx marks a claimed row COMPLETED. A new row was inserted
// COMPLETED by the claim, and a marked one completed in place; they only
// need the result reference.
func (in *core) completeTx(ctx context.Context, tx dbdriver.Tx, c claim, ref string) error {
	if (c.from == "" || c.completed) && ref == "" {
		return nil
	}
	_, err := tx.Exec(ctx, in.queries.complete, in.cfg.Consumer, c.rowID, ref)
	return err
}

// failureStatus is FAILED_FINAL (with its reason) at the attempt limit or for
// a permanent error, else FAILED_RETRYABLE.
func (in *core) failureStatus(attempt int, herr error) (Status, string) {
	switch {
	case IsPermanent(herr):
		return StatusFailedFinal, ReasonPermanent
	case attempt >= in.cfg.MaxAttempts:
		return StatusFailedFinal, ReasonMaxAttempts
	}
	return StatusFailedRetryable, ""
}

func failureResult(status Status, attempt int, reason string, herr error) Result {
	if status == StatusFailedFinal {
		return Result{Outcome: DeadLettered, Status: status, Attempts: attempt, Reason: reason, Err: herr}
	}
	return Result{Outcome: Retry, Status: status, Attempts: attempt, Err: herr}
}

// recordFailure writes the failed attempt in a statement of its own, after
// the handler's transaction rolled back.
func (in *core) recordFailure(ctx context.Context, msg *Message, hash []byte, c claim, herr error) (Result, error) {
	status, reason := in.failureStatus(c.attempt, herr)
	var (
		stored   Status
		attempts int
	)
	err := dbdriver.RunStatement(ctx, in.db, func(q dbdriver.Querier) error {
		return q.QueryRow(ctx, in.queries.recordFailure, in.cfg.Consumer, c.rowID, msg.BusinessKey, hash,
			status, c.attempt, in.errText(herr), msg.Topic, msg.Partition, msg.Offset).Scan(&stored, &attempts)
	})
	switch {
	case err == nil:
	case errors.Is(err, pgx.ErrNoRows), sqlState(err) == codeUniqueViolation:
		// Another delivery settled the message (or claimed its business key
		// under another ID) meanwhile; the next delivery sees its outcome.
		return Result{Outcome: Retry, Attempts: c.attempt, Err: herr}, nil
	default:
		return Result{}, fmt.Errorf("inbox: record failure of %s: %w (handler: %w)", msg.ID, err, herr)
	}
	return failureResult(stored, attempts, reason, herr), nil
}

// deliver is one delivery of msg by Process, ProcessTx or ProcessExternal:
// the key rules first, then fn between begin and finish (the in-flight gauge,
// the duration and outcome metrics, the log record).
func (in *core) deliver(ctx context.Context, msg Message, fn func(msg *Message) (Result, error)) (Result, error) {
	if err := msg.validate(); err != nil {
		return Result{}, err
	}
	start := in.begin(&msg)
	res, err := fn(&msg)
	return in.finish(ctx, &msg, start, res, err)
}

// begin starts the bookkeeping of one delivery.
func (in *core) begin(msg *Message) time.Time {
	in.metrics.inFlight.Inc()
	now := time.Now()
	in.observeAge(msg, now)
	return now
}

// observeAge records the age of msg at processing time, when it has a
// record timestamp.
func (in *core) observeAge(msg *Message, now time.Time) {
	if !msg.Time.IsZero() {
		in.metrics.messageAge.Observe(max(now.Sub(msg.Time), 0).Seconds())
	}
}

// finish records metrics and logs for one delivery; the log records carry
// the trace ID of ctx's span, when there is one.
func (in *core) finish(ctx context.Context, msg *Message, start time.Time, res Result, err error) (Result, error) {
	m := in.metrics
	m.inFlight.Dec()
	m.duration.Observe(time.Since(start).Seconds())
	var traceAttr []any
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		traceAttr = []any{"trace_id", sc.TraceID().String()}
	}
	if err != nil && res.Outcome == 0 {
		in.log.Error("inbox: delivery failed", append([]any{"message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey), "err", in.errText(err)},
			traceAttr...)...)
		return res, err
	}
	m.outcomes.WithLabelValues(res.Outcome.String()).Inc()
	level, text := slog.LevelDebug, ""
	var extra []any
	switch res.Outcome {
	case Processed:
		m.attempts.Observe(float64(res.Attempts))
	case Retry:
		m.retries.Inc()
		level, text, extra = slog.LevelWarn, "inbox: handler failed, will retry", []any{"err", in.errText(res.Err)}
	case DeadLettered:
		if res.Reason != ReasonFailedFinal {
			m.attempts.Observe(float64(res.Attempts))
			m.deadLettered.WithLabelValues(res.Reason).Inc()
		}
		level, text, extra = slog.LevelWarn, "inbox: dead-lettered", []any{"reason", res.Reason, "err", in.errText(res.Err)}
	case Conflict:
		level, text, extra = slog.LevelError, "inbox: conflict", []any{"reason", res.Reason}
	}
	// Most deliveries log at Debug: build the attributes only when that
	// is on (the throughput of the consumer loop: docs/benchmarks.md).
	if in.log.Enabled(ctx, level) {
		if text == "" {
			text = "inbox: " + res.Outcome.String()
		}
		from := string(res.from)
		if from == "" && res.Outcome != Duplicate && res.Outcome != Busy && res.Outcome != Conflict {
			from = "NEW"
		}
		attrs := append([]any{"message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey), "outcome", res.Outcome.String(),
			"from", from, "to", string(res.Status), "attempt", res.Attempts}, extra...)
		attrs = append(attrs, traceAttr...)
		in.log.Log(ctx, level, text, attrs...)
	}
	if res.Outcome == Conflict && in.cfg.ConflictPolicy == ConflictPolicyStop {
		return res, res.Err
	}
	return res, err
}
