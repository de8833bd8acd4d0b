package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// ExternalHandler performs the effect of msg outside the database (a
// payment gateway, an e-mail) and must pass idempotencyKey (the message's
// business key) to the external system, so that a takeover after a crash does not
// repeat the effect there. It returns an optional result reference.
//
// Its ctx ends when the lease does (cause ErrLeaseExpired); ExtendLease moves
// the end. For a system without idempotency keys, AttemptFromContext tells a
// first attempt from a takeover (attempt number, when the previous attempt
// started, the request reference it saved): a takeover asks the system what
// happened first, using that reference. SaveRequestRef records the reference
// before calling out; returning ErrAlreadyDone with the result reference
// completes the message without a new call.
//
// The same handler serves ProcessExternal and inboxkafka.Config.ExternalHandler,
// on either driver.
type ExternalHandler func(ctx context.Context, msg Message, idempotencyKey string) (resultRef string, err error)

// ProcessExternal is the two-phase path for external effects: it commits a
// PROCESSING claim holding a lease of Config.LeaseDuration, calls handler
// outside any transaction, then records COMPLETED with the result reference
// (or the failure, as Process does). A delivery that finds a live lease
// answers Busy; one that finds an expired lease takes the message over with
// the same idempotency key and attempt count + 1, unless Config.MaxAttempts
// attempts were made: then the message becomes FAILED_FINAL and the outcome
// is DeadLettered (reason "max-attempts") without calling handler, so a
// handler that crashes the process every time is not retried forever. When
// the handler outlives its lease and another delivery took over (or the
// message was dead-lettered, or revived and claimed again), the error wraps
// ErrLeaseLost and the outcome is Busy.
func (in *Inbox[TTx]) ProcessExternal(ctx context.Context, msg Message, handler ExternalHandler) (Result, error) {
	if handler == nil {
		return Result{}, errNilHandler
	}
	return in.deliver(ctx, msg, func(msg *Message) (Result, error) { return in.processExternal(ctx, msg, handler) })
}

func (in *core) processExternal(ctx context.Context, msg *Message, handler ExternalHandler) (Result, error) {
	hash := in.hash(msg)
	var c claim
	for try := 0; ; try++ {
		err := dbdriver.BeginFunc(ctx, in.db, func(tx dbdriver.Tx) error {
			var err error
			c, err = in.claimTx(ctx, tx, msg, hash, in.cfg.LeaseDuration, false)
			return err
		})
		if err == nil {
			break
		}
		if !isTxRetry(err) || try >= in.cfg.TxRetries {
			return Result{}, err
		}
	}
	if c.done != nil {
		return *c.done, nil
	}
	key := msg.BusinessKey
	in.log.Debug("inbox: lease taken", "message_id", in.logKey(msg.ID), "business_key", in.logKey(key),
		"from", string(c.from), "to", string(StatusProcessing), "attempt", c.attempt)
	hctx, l, stop := in.withLease(ctx, c)
	ref, herr := in.runExternal(hctx, msg, key, handler)
	stop()
	token := l.token()
	// The outcome must be recorded even when ctx ended during the handler.
	ctx = context.WithoutCancel(ctx)
	reconciled := false
	if errors.Is(herr, ErrAlreadyDone) {
		reconciled, herr = true, nil
		in.log.Info("inbox: reconciled: effect already done", "message_id", in.logKey(msg.ID), "business_key", in.logKey(key),
			"attempt", c.attempt, "result_ref", ref)
	}
	if herr != nil {
		status, reason := in.failureStatus(c.attempt, herr)
		tag, err := dbdriver.ExecOne(ctx, in.db, in.queries.failFenced, in.cfg.Consumer, c.rowID, status, in.errText(herr), c.attempt, token)
		if err != nil {
			return Result{}, fmt.Errorf("inbox: record failure of %s: %w (handler: %w)", msg.ID, err, herr)
		}
		if tag == 0 {
			return Result{Outcome: Busy, Attempts: c.attempt, Err: herr, IdempotencyKey: key},
				fmt.Errorf("%w: %s (handler: %w)", ErrLeaseLost, msg.ID, herr)
		}
		r := failureResult(status, c.attempt, reason, herr)
		r.IdempotencyKey, r.from = key, StatusProcessing
		return r, nil
	}
	tag, err := dbdriver.ExecOne(ctx, in.db, in.queries.completeFenced, in.cfg.Consumer, c.rowID, ref, c.attempt, token)
	if err != nil {
		return Result{}, fmt.Errorf("inbox: complete %s: %w", msg.ID, err)
	}
	if tag == 0 {
		return Result{Outcome: Busy, Attempts: c.attempt, ResultRef: ref, IdempotencyKey: key},
			fmt.Errorf("%w: %s", ErrLeaseLost, msg.ID)
	}
	return Result{Outcome: Processed, Status: StatusCompleted, Attempts: c.attempt, ResultRef: ref, IdempotencyKey: key,
		Reconciled: reconciled, from: StatusProcessing}, nil
}
