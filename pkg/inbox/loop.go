package inbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// The consumer loop (package inboxkafka) reaches the inbox's machinery
// through loopInternals, its methods exported for the loop's interface but
// the type unexported: only the Inbox's loopHook hands it out, to
// loophook.Internals, and only packages under pkg/inbox can import
// loophook. The alias gives the embedded Hook an unexported field name, so
// the Inbox's API does not show it.
type loopHook = loophook.Hook

// loopInternals is what the consumer loop needs of in beyond its exported
// API.
func (in *Inbox[TTx]) loopInternals() any {
	return &loopCore[TTx]{in: in, tracer: in.cfg.TracerProvider.Tracer(tracerName)}
}

// loopCore is the consumer loop's view of an Inbox.
type loopCore[TTx any] struct {
	in     *Inbox[TTx]
	tracer trace.Tracer
}

// Log is the inbox's logger.
func (l *loopCore[TTx]) Log() *slog.Logger { return l.in.log }

// LogKey is s as the inbox logs a message ID or business key.
func (l *loopCore[TTx]) LogKey(s string) string { return l.in.logKey(s) }

// MaxAttempts is Config.MaxAttempts.
func (l *loopCore[TTx]) MaxAttempts() int { return l.in.cfg.MaxAttempts }

// Backoff is Config.Backoff.
func (l *loopCore[TTx]) Backoff(attempt int) time.Duration { return l.in.cfg.Backoff(attempt) }

// CanPurge reports whether the driver handle runs single statements (the
// purge needs it).
func (l *loopCore[TTx]) CanPurge() bool { return l.in.admin != nil }

// Purge deletes the consumer's COMPLETED rows older than olderThan.
func (l *loopCore[TTx]) Purge(ctx context.Context, olderThan time.Duration) (int64, error) {
	return l.in.purge(ctx, olderThan)
}

// SetQueueBytes sets the pgoutbox_inbox_queue_bytes gauge.
func (l *loopCore[TTx]) SetQueueBytes(v float64) { l.in.metrics.queueBytes.Set(v) }

// FetchFailed counts a fetch error in pgoutbox_inbox_fetch_errors_total.
func (l *loopCore[TTx]) FetchFailed() { l.in.metrics.fetchErrors.Inc() }

// Process is Inbox.Process; mark first counts the attempt in its own
// transaction (see Inbox.process).
func (l *loopCore[TTx]) Process(ctx context.Context, msg Message, handler TxHandler[TTx], mark bool) (Result, error) {
	return l.in.process(ctx, msg, handler, mark)
}

// ProcessBatch handles msgs in one transaction; false means nothing was
// committed (see Inbox.processBatch).
func (l *loopCore[TTx]) ProcessBatch(ctx context.Context, msgs []Message, handler TxHandler[TTx]) ([]Result, bool) {
	return l.in.processBatch(ctx, msgs, handler)
}

// MessageFromKafka builds the inbox message of a record; bad is set when
// it goes to the dead-letter topic untouched (see messageFromKafka).
func (l *loopCore[TTx]) MessageFromKafka(r KafkaRecord) (Message, *Result) {
	return messageFromKafka(r)
}

// DeadLetterUnprocessable accounts for a message that goes to the
// dead-letter topic without an inbox row.
func (l *loopCore[TTx]) DeadLetterUnprocessable(msg *Message, bad Result) Result {
	return l.in.deadLetterUnprocessable(msg, bad)
}

// MarkDeadLettered records that the dead letter of a FAILED_FINAL message
// was written.
func (l *loopCore[TTx]) MarkDeadLettered(ctx context.Context, msg *Message) {
	l.in.markDeadLettered(ctx, msg)
}

// DeadLetterSent reports whether res's dead letter was written before (a
// redelivery of a FAILED_FINAL message).
func (l *loopCore[TTx]) DeadLetterSent(res Result) bool { return res.deadLetterSent }

// WriteDeadLetter writes the dead letter of km through d, once every
// in-sync replica has it.
func (l *loopCore[TTx]) WriteDeadLetter(ctx context.Context, d *DeadLetterWriter, km KafkaRecord, res Result) error {
	return d.w.write(ctx, km, res)
}

// DeadLetterHeaders are the headers of km's dead letter for res, for a
// loop that writes dead letters to a broker of its own (see
// deadLetterHeaders).
func (l *loopCore[TTx]) DeadLetterHeaders(km KafkaRecord, res Result) []KafkaHeader {
	return deadLetterHeaders(km, res, l.in.cfg.Consumer, l.in.errText, l.in.logKey)
}

// IsRecordError reports whether err is a database error caused by the
// record's content (see isRecordError).
func (l *loopCore[TTx]) IsRecordError(err error) bool { return isRecordError(err) }

// StartDelivery starts the span of one delivery in group (see
// core.startDelivery).
func (l *loopCore[TTx]) StartDelivery(ctx context.Context, group string, msg *Message) (context.Context, func(Result, error)) {
	return l.in.startDelivery(ctx, l.tracer, group, msg)
}

// StartSettle starts the span of one offset commit in group (see
// core.startSettle).
func (l *loopCore[TTx]) StartSettle(ctx context.Context, group string, topics []string, partitions int) (context.Context, func(error)) {
	return l.in.startSettle(ctx, l.tracer, group, topics, partitions)
}

// messageFromKafka builds the inbox message of a record. bad is set when the
// record cannot be deduplicated (a contract header repeated or missing, or a
// key that breaks the key rules): it goes to the dead-letter topic untouched.
func messageFromKafka(r KafkaRecord) (msg Message, bad *Result) {
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
	if _, err := dbdriver.ExecOne(ctx, in.db, in.queries.markDeadLettered, in.cfg.Consumer, msg.BusinessKey); err != nil {
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
