package loopcore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Deliverer takes the deliveries of one consumer loop to settled
// outcomes through an Inbox. It is safe for concurrent use when its
// functions are.
type Deliverer[TTx any] struct {
	Core Internals[TTx]
	In   *inbox.Inbox[TTx]
	Log  *slog.Logger
	// Group names the consumer (group) in spans.
	Group string
	// Handler, or else External, handles each message.
	Handler  inbox.TxHandler[TTx]
	External inbox.ExternalHandler
	// OnResult, when set, is called after each attempt's database commit.
	OnResult func(inbox.Message, inbox.Result)
	// DeadLetter writes the dead letter of km for res, once the broker
	// has it; DeadLetterDest names where, for logs.
	DeadLetter     func(ctx context.Context, km inbox.KafkaRecord, res inbox.Result) error
	DeadLetterDest string
}

// writeTimeout bounds one dead-letter write.
const writeTimeout = 30 * time.Second

// Handle settles one delivery of km: it processes the message (mark
// first counts the attempt in its own transaction, for a message that may
// have killed a process before), retries inbox.Retry, inbox.Busy and an
// unavailable database after the inbox's backoff, and writes the dead
// letter of a dead-lettered message. The current attempt always runs to
// its end, even when ctx ends; ctx bounds the waits between attempts.
//
// settled means the message's position may be acknowledged (committed);
// before that an earlier delivery had settled it (a Duplicate, or a
// FAILED_FINAL message whose dead letter was written). stop, when set,
// wraps inbox.ErrConflict (ConflictPolicyStop): acknowledge nothing and
// stop the loop. Neither set: ctx ended first. retrying, when set, is
// called with true when the message first waits for another attempt, and
// with false when it no longer does.
func (d *Deliverer[TTx]) Handle(ctx context.Context, km inbox.KafkaRecord, mark bool, retrying func(bool)) (settled, before bool, stop error) {
	msg, bad := d.Core.MessageFromKafka(km)
	work := context.WithoutCancel(ctx)
	// rejected counts the attempts the database refused for the record's
	// content before any inbox row could hold the count; it lives as long
	// as this delivery is being handled.
	rejected := 0
	for wait := 1; ; wait++ {
		var (
			res inbox.Result
			err error
		)
		sctx, end := d.Core.StartDelivery(work, d.Group, &msg)
		if bad != nil {
			res = d.Core.DeadLetterUnprocessable(&msg, *bad)
		} else {
			res, err = d.process(sctx, msg, mark)
		}
		end(res, err)
		if errors.Is(err, inbox.ErrConflict) {
			return false, false, err // ConflictPolicyStop: never ack a conflict silently
		}
		if err != nil && res.Outcome == 0 {
			if d.Core.IsRecordError(err) {
				rejected++
				if rejected >= d.Core.MaxAttempts() {
					bad = &inbox.Result{Outcome: inbox.DeadLettered, Reason: inbox.ReasonMaxAttempts, Attempts: rejected, Err: err}
					res = d.Core.DeadLetterUnprocessable(&msg, *bad)
				}
			}
			if res.Outcome == 0 {
				res = inbox.Result{Outcome: inbox.Retry, Attempts: rejected, Err: err} // database unavailable: try again
			}
		}
		if d.OnResult != nil {
			d.OnResult(msg, res)
		}
		if res.Outcome.Acked() {
			if res.Outcome == inbox.DeadLettered && !d.Core.DeadLetterSent(res) {
				if !d.sendDeadLetter(ctx, km, &msg, res) {
					return false, false, nil
				}
				if bad == nil && res.Reason != inbox.ReasonConflict {
					d.Core.MarkDeadLettered(work, &msg)
				}
			}
			return true, res.Outcome == inbox.Duplicate || res.Reason == inbox.ReasonFailedFinal, nil
		}
		// inbox.Retry or Busy: hold the message and try again after a backoff.
		if wait == 1 && retrying != nil {
			retrying(true)
			defer retrying(false)
		}
		t := time.NewTimer(d.Core.Backoff(max(res.Attempts, wait)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, false, nil
		case <-t.C:
		}
	}
}

func (d *Deliverer[TTx]) process(ctx context.Context, msg inbox.Message, mark bool) (inbox.Result, error) {
	if d.Handler == nil {
		return d.In.ProcessExternal(ctx, msg, d.External)
	}
	return d.Core.Process(ctx, msg, d.Handler, mark)
}

// sendDeadLetter writes the message's dead letter, retrying until it
// succeeds or ctx ends (then the position stays unacknowledged and the
// redelivery answers inbox.DeadLettered again).
func (d *Deliverer[TTx]) sendDeadLetter(ctx context.Context, km inbox.KafkaRecord, msg *inbox.Message, res inbox.Result) bool {
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := d.DeadLetter(wctx, km, res)
		cancel()
		if err == nil {
			return true
		}
		d.Log.Warn("inbox: dead-letter write failed", "message_id", d.Core.LogKey(msg.ID), "business_key", d.Core.LogKey(msg.BusinessKey),
			"topic", d.DeadLetterDest, "attempt", attempt, "err", err)
		t := time.NewTimer(min(time.Duration(attempt)*100*time.Millisecond, 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
