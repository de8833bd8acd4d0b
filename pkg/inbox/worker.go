package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// worker handles the messages of one partition, one at a time, in order.
type worker[TTx any] struct {
	c      *Consumer[TTx]
	reader *kafka.Reader
	dlq    *deadLetterWriter
	stop   context.CancelCauseFunc
	// suspect counts the coming messages that may repeat an attempt that
	// killed a process: the first BatchSize after the worker starts (the
	// previous owner of the partition had at most one batch in flight past
	// its committed offset) or after the offsets go back (a rebalance
	// redelivers). Those run one at a time, each attempt counted by
	// markAttempt before it starts (Handler only).
	suspect int
	// last is the highest offset handed to the worker (-1: none yet).
	last int64
}

// newWorker returns the worker of a partition that this process has not
// handled yet.
func newWorker[TTx any](c *Consumer[TTx], reader *kafka.Reader, dlq *deadLetterWriter, stop context.CancelCauseFunc) *worker[TTx] {
	return &worker[TTx]{c: c, reader: reader, dlq: dlq, stop: stop, suspect: c.cfg.BatchSize, last: -1}
}

// run handles the partition's queue until it is closed or ctx ends; on a
// graceful stop the rest of the queue is left for the next run (its offsets
// are not committed).
func (w *worker[TTx]) run(ctx context.Context, ch <-chan kafka.Message) {
	batch := make([]kafka.Message, 0, w.c.cfg.BatchSize)
	for m := range ch {
		if ctx.Err() != nil {
			return
		}
		batch = append(batch[:0], m)
	drain:
		for len(batch) < cap(batch) {
			select {
			case m, ok := <-ch:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		for _, m := range batch {
			if m.Offset <= w.last {
				w.suspect = w.c.cfg.BatchSize // a redelivery
			}
			w.last = max(w.last, m.Offset)
		}
		if len(batch) > 1 && w.suspect == 0 && w.handleBatch(ctx, batch) {
			for i := range batch {
				w.c.queue.give(recordBytes(&batch[i]))
			}
			continue
		}
		for i, m := range batch {
			if ctx.Err() != nil {
				return
			}
			mark := w.suspect > 0 && w.c.cfg.Handler != nil
			w.suspect = max(w.suspect-1, 0)
			w.handle(ctx, m, mark)
			w.c.queue.give(recordBytes(&batch[i]))
		}
	}
}

// handleBatch tries the batch fast path; false means nothing was committed
// and the messages must be handled one at a time.
func (w *worker[TTx]) handleBatch(ctx context.Context, batch []kafka.Message) bool {
	c := w.c
	if c.cfg.Handler == nil {
		return false
	}
	msgs := make([]Message, len(batch))
	for i, km := range batch {
		var bad *Result
		if msgs[i], bad = messageFromKafka(km); bad != nil {
			return false
		}
	}
	work := context.WithoutCancel(ctx)
	// A span per message; the handler of each runs in its own.
	ctxs := make(map[int64]context.Context, len(msgs))
	ends := make([]func(Result, error), len(msgs))
	for i := range msgs {
		ctxs[msgs[i].Offset], ends[i] = c.startDelivery(work, &msgs[i])
	}
	handler := func(ctx context.Context, tx TTx, msg Message) (string, error) {
		if sctx, ok := ctxs[msg.Offset]; ok {
			ctx = sctx
		}
		return c.cfg.Handler(ctx, tx, msg)
	}
	results, ok := c.in.processBatch(work, msgs, handler)
	for i, end := range ends {
		if ok {
			end(results[i], nil)
		} else {
			end(Result{}, errBatchRolledBack)
		}
	}
	if !ok {
		return false
	}
	if c.cfg.OnResult != nil {
		for i := range msgs {
			c.cfg.OnResult(msgs[i], results[i])
		}
	}
	// Committing the last offset commits the partition up to it.
	last := batch[len(batch)-1]
	w.commit(work, last, &msgs[len(msgs)-1])
	return true
}

// errBatchRolledBack ends the spans of a batch that was rolled back to be
// handled one message at a time (each then gets a span of its own).
var errBatchRolledBack = errors.New("inbox: batch rolled back; handled one message at a time")

// commitTimeout bounds an offset commit and a dead-letter write during a
// graceful stop.
const commitTimeout = 30 * time.Second

// handle settles one message: it returns once the offset is committed, when
// ctx ends during a retry wait, or after stopping the run on a fatal error.
// The current attempt itself always finishes, even when ctx ends.
func (w *worker[TTx]) handle(ctx context.Context, km kafka.Message, mark bool) {
	c := w.c
	msg, bad := messageFromKafka(km)
	work := context.WithoutCancel(ctx)
	// rejected counts the attempts the database refused for the record's
	// content before any inbox row could hold the count; it lives as long
	// as this (partition, offset) is being handled.
	rejected := 0
	for wait := 1; ; wait++ {
		var (
			res Result
			err error
		)
		sctx, end := c.startDelivery(work, &msg)
		if bad != nil {
			res = c.in.deadLetterUnprocessable(&msg, *bad)
		} else {
			res, err = w.process(sctx, msg, mark)
		}
		end(res, err)
		if errors.Is(err, ErrConflict) {
			// ConflictPolicyStop: never ack a conflict silently.
			w.stop(fmt.Errorf("inbox: stopped at record %s/%d@%d: %w", km.Topic, km.Partition, km.Offset, err))
			return
		}
		if err != nil && res.Outcome == 0 {
			if isRecordError(err) {
				rejected++
				if rejected >= c.in.cfg.MaxAttempts {
					bad = &Result{Outcome: DeadLettered, Reason: ReasonMaxAttempts, Attempts: rejected, Err: err}
					res = c.in.deadLetterUnprocessable(&msg, *bad)
				}
			}
			if res.Outcome == 0 {
				res = Result{Outcome: Retry, Attempts: rejected, Err: err} // database unavailable: try again
			}
		}
		if c.cfg.OnResult != nil {
			c.cfg.OnResult(msg, res)
		}
		if res.Outcome.Acked() {
			if res.Outcome == DeadLettered && !res.deadLetterSent {
				if !w.sendDeadLetter(ctx, km, &msg, res) {
					return
				}
				if bad == nil && res.Reason != ReasonConflict {
					c.in.markDeadLettered(work, &msg)
				}
			}
			w.commit(work, km, &msg)
			return
		}
		// Retry or Busy: hold the partition and try again after a backoff.
		t := time.NewTimer(c.in.cfg.Backoff(max(res.Attempts, wait)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (w *worker[TTx]) process(ctx context.Context, msg Message, mark bool) (Result, error) {
	c := w.c
	if c.cfg.Handler == nil {
		return c.in.ProcessExternal(ctx, msg, c.cfg.ExternalHandler)
	}
	return c.in.process(ctx, msg, c.cfg.Handler, mark)
}

// sendDeadLetter writes the message to the dead-letter topic, retrying until
// it succeeds or ctx ends (then the offset stays uncommitted and the
// redelivery answers DeadLettered again).
func (w *worker[TTx]) sendDeadLetter(ctx context.Context, km kafka.Message, msg *Message, res Result) bool {
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		err := w.dlq.write(wctx, km, res)
		cancel()
		if err == nil {
			return true
		}
		w.c.log.Warn("inbox: dead-letter write failed", "message_id", w.c.in.logKey(msg.ID), "business_key", w.c.in.logKey(msg.BusinessKey),
			"topic", w.dlq.topic, "attempt", attempt, "err", err)
		t := time.NewTimer(min(time.Duration(attempt)*100*time.Millisecond, 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// commit commits the offset after the database commit. A failure is only
// logged: the message is redelivered and answers Duplicate.
func (w *worker[TTx]) commit(ctx context.Context, km kafka.Message, msg *Message) {
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := w.reader.CommitMessages(cctx, km); err != nil {
		w.c.log.Warn("inbox: offset commit failed; the message will be redelivered", "message_id", w.c.in.logKey(msg.ID),
			"topic", km.Topic, "partition", km.Partition, "offset", km.Offset, "err", err)
	}
}

// messageFromKafka builds the inbox message of a record. bad is set when the
// record cannot be deduplicated (a contract header repeated or missing, or a
// key that breaks the key rules): it goes to the dead-letter topic untouched.
func messageFromKafka(km kafka.Message) (msg Message, bad *Result) {
	r := KafkaRecord{Topic: km.Topic, Partition: km.Partition, Offset: km.Offset, Key: km.Key, Value: km.Value, Time: km.Time,
		Headers: make([]KafkaHeader, len(km.Headers))}
	for i, h := range km.Headers {
		r.Headers[i] = KafkaHeader(h)
	}
	msg = r.Message()
	if msg.Headers == nil {
		msg.Headers = map[string]string{}
	}
	if msg.invalid != nil {
		return msg, &Result{Outcome: DeadLettered, Reason: ReasonRepeatedHeader, Err: msg.invalid}
	}
	var missing string
	switch {
	case msg.ID == "" && msg.BusinessKey == "":
		missing = HeaderMessageID + " and " + HeaderBusinessKey + " headers missing"
	case msg.ID == "":
		missing = HeaderMessageID + " header missing"
	case msg.BusinessKey == "":
		missing = HeaderBusinessKey + " header missing"
	}
	if missing != "" {
		return msg, &Result{Outcome: DeadLettered, Reason: ReasonMissingHeaders, Err: errors.New(missing)}
	}
	if err := msg.validate(); err != nil {
		return msg, &Result{Outcome: DeadLettered, Reason: ReasonInvalidKey, Err: err}
	}
	return msg, nil
}

// markDeadLettered records that the dead-letter record of a FAILED_FINAL
// message was written. A failure is only logged: a redelivery then writes the
// record again (at least once, never lost).
func (in *core) markDeadLettered(ctx context.Context, msg *Message) {
	if _, err := execOne(ctx, in.db, in.queries.markDeadLettered, in.cfg.Consumer, msg.BusinessKey); err != nil {
		in.log.Warn("inbox: recording the dead-letter write failed", "message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey), "err", err)
	}
}

// deadLetterUnprocessable accounts for a message the inbox cannot
// deduplicate (bad, from messageFromKafka) or one the database refuses for
// its content: it goes to the dead-letter topic without an inbox row.
func (in *core) deadLetterUnprocessable(msg *Message, bad Result) Result {
	in.metrics.outcomes.WithLabelValues(DeadLettered.String()).Inc()
	in.metrics.deadLettered.WithLabelValues(bad.Reason).Inc()
	in.log.Warn("inbox: dead-lettered", "message_id", in.logKey(msg.ID), "business_key", in.logKey(msg.BusinessKey),
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "reason", bad.Reason, "attempt", bad.Attempts,
		"err", in.errText(bad.Err))
	return bad
}
