package loopcore

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Internals is what a loop needs of an Inbox beyond its exported API;
// package inbox provides it through loophook (see inbox's loop.go).
type Internals[TTx any] interface {
	Log() *slog.Logger
	LogKey(s string) string
	MaxAttempts() int
	Backoff(attempt int) time.Duration
	CanPurge() bool
	Purge(ctx context.Context, olderThan time.Duration) (int64, error)
	SetQueueBytes(v float64)
	FetchFailed()
	Process(ctx context.Context, msg inbox.Message, handler inbox.TxHandler[TTx], mark bool) (inbox.Result, error)
	ProcessBatch(ctx context.Context, msgs []inbox.Message, handler inbox.TxHandler[TTx]) ([]inbox.Result, bool)
	MessageFromKafka(r inbox.KafkaRecord) (inbox.Message, *inbox.Result)
	DeadLetterUnprocessable(msg *inbox.Message, bad inbox.Result) inbox.Result
	MarkDeadLettered(ctx context.Context, msg *inbox.Message)
	DeadLetterSent(res inbox.Result) bool
	WriteDeadLetter(ctx context.Context, d *inbox.DeadLetterWriter, km inbox.KafkaRecord, res inbox.Result) error
	// DeadLetterHeaders are the headers of km's dead letter for res: km's
	// own but any dlq-* header, then the dlq-* headers of the outcome.
	DeadLetterHeaders(km inbox.KafkaRecord, res inbox.Result) []inbox.KafkaHeader
	IsRecordError(err error) bool
	StartDelivery(ctx context.Context, group string, msg *inbox.Message) (context.Context, func(inbox.Result, error))
	StartSettle(ctx context.Context, group string, topics []string, partitions int) (context.Context, func(error))
}
