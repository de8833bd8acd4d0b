package inbox

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
)

// worker handles the messages of one partition, one at a time, in order.
type worker struct {
	c      *Consumer
	reader *kafka.Reader
	dlq    *deadLetterWriter
	stop   context.CancelCauseFunc
}

// run handles the partition's queue until it is closed or ctx ends; on a
// graceful stop the rest of the queue is left for the next run (its offsets
// are not committed).
func (w *worker) run(ctx context.Context, ch <-chan kafka.Message) {
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
		if len(batch) > 1 && w.handleBatch(ctx, batch) {
			continue
		}
		for _, m := range batch {
			if ctx.Err() != nil {
				return
			}
			w.handle(ctx, m)
		}
	}
}

// handleBatch tries the batch fast path; false means nothing was committed
// and the messages must be handled one at a time.
func (w *worker) handleBatch(ctx context.Context, batch []kafka.Message) bool {
	c := w.c
	if c.cfg.Handler == nil {
		return false
	}
	msgs := make([]Message, len(batch))
	for i, km := range batch {
		var missing string
		if msgs[i], missing = messageFromKafka(km); missing != "" {
			return false
		}
	}
	work := context.WithoutCancel(ctx)
	results, ok := c.in.processBatch(work, c.cfg.DB, msgs, c.cfg.Handler)
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

// commitTimeout bounds an offset commit and a dead-letter write during a
// graceful stop.
const commitTimeout = 30 * time.Second

// handle settles one message: it returns once the offset is committed, when
// ctx ends during a retry wait, or after stopping the run on a fatal error.
// The current attempt itself always finishes, even when ctx ends.
func (w *worker) handle(ctx context.Context, km kafka.Message) {
	c := w.c
	msg, missing := messageFromKafka(km)
	work := context.WithoutCancel(ctx)
	for wait := 1; ; wait++ {
		var (
			res Result
			err error
		)
		if missing != "" {
			res = c.in.deadLetterUnprocessable(&msg, missing)
		} else {
			res, err = w.process(work, msg)
		}
		if errors.Is(err, ErrConflict) {
			w.stop(err) // ConflictPolicyError: never ack a conflict silently
			return
		}
		if err != nil && res.Outcome == 0 {
			res = Result{Outcome: Retry, Err: err} // database unavailable: try again
		}
		if c.cfg.OnResult != nil {
			c.cfg.OnResult(msg, res)
		}
		if res.Outcome.Acked() {
			if res.Outcome == DeadLettered && !res.deadLetterSent {
				if !w.sendDeadLetter(ctx, km, &msg, res) {
					return
				}
				if missing == "" && res.Reason != ReasonConflict {
					c.in.markDeadLettered(work, c.cfg.DB, &msg)
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

func (w *worker) process(ctx context.Context, msg Message) (Result, error) {
	c := w.c
	if c.cfg.ExternalHandler != nil {
		return c.in.ProcessExternal(ctx, c.cfg.DB, msg, func(ctx context.Context, key string) (string, error) {
			return c.cfg.ExternalHandler(ctx, msg, key)
		})
	}
	return c.in.Process(ctx, c.cfg.DB, msg, func(ctx context.Context, tx pgx.Tx) (string, error) {
		return c.cfg.Handler(ctx, tx, msg)
	})
}

// sendDeadLetter writes the message to the dead-letter topic, retrying until
// it succeeds or ctx ends (then the offset stays uncommitted and the
// redelivery answers DeadLettered again).
func (w *worker) sendDeadLetter(ctx context.Context, km kafka.Message, msg *Message, res Result) bool {
	for attempt := 1; ; attempt++ {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		err := w.dlq.write(wctx, km, res)
		cancel()
		if err == nil {
			return true
		}
		w.c.log.Warn("inbox: dead-letter write failed", "message_id", msg.ID, "business_key", msg.BusinessKey,
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
func (w *worker) commit(ctx context.Context, km kafka.Message, msg *Message) {
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := w.reader.CommitMessages(cctx, km); err != nil {
		w.c.log.Warn("inbox: offset commit failed; the message will be redelivered", "message_id", msg.ID,
			"topic", km.Topic, "partition", km.Partition, "offset", km.Offset, "err", err)
	}
}

// messageFromKafka builds the inbox message of a record. missing names the
// absent required headers ("" when complete).
func messageFromKafka(km kafka.Message) (Message, string) {
	msg := Message{
		Payload:   km.Value,
		Key:       km.Key,
		Headers:   make(map[string]string, len(km.Headers)),
		Topic:     km.Topic,
		Partition: km.Partition,
		Offset:    km.Offset,
		Time:      km.Time,
	}
	for _, h := range km.Headers {
		if _, dup := msg.Headers[h.Key]; !dup {
			msg.Headers[h.Key] = string(h.Value)
		}
	}
	msg.ID = msg.Headers[HeaderMessageID]
	msg.BusinessKey = msg.Headers[HeaderBusinessKey]
	switch {
	case msg.ID == "" && msg.BusinessKey == "":
		return msg, HeaderMessageID + " and " + HeaderBusinessKey + " headers missing"
	case msg.ID == "":
		return msg, HeaderMessageID + " header missing"
	case msg.BusinessKey == "":
		return msg, HeaderBusinessKey + " header missing"
	}
	return msg, ""
}

// markDeadLettered records that the dead-letter record of a FAILED_FINAL
// message was written. A failure is only logged: a redelivery then writes the
// record again (at least once, never lost).
func (in *Inbox) markDeadLettered(ctx context.Context, db TxBeginner, msg *Message) {
	if _, err := execOne(ctx, db, in.queries.markDeadLettered, in.cfg.Consumer, msg.BusinessKey); err != nil {
		in.log.Warn("inbox: recording the dead-letter write failed", "message_id", msg.ID, "business_key", msg.BusinessKey, "err", err)
	}
}

// deadLetterUnprocessable accounts for a message the inbox cannot
// deduplicate (no message ID or business key): it goes to the dead-letter
// topic without touching the table.
func (in *Inbox) deadLetterUnprocessable(msg *Message, why string) Result {
	res := Result{Outcome: DeadLettered, Reason: ReasonMissingHeaders, Err: errors.New(why)}
	in.metrics.outcomes.WithLabelValues(DeadLettered.String()).Inc()
	in.metrics.deadLettered.WithLabelValues(ReasonMissingHeaders).Inc()
	in.log.Warn("inbox: dead-lettered", "message_id", msg.ID, "business_key", msg.BusinessKey,
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "reason", ReasonMissingHeaders, "err", why)
	return res
}
