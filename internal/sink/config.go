package sink

import (
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/producer"
)

// Config is what the sink takes of relay.Config (whose fields document
// each); package relay derives it.
type Config struct {
	// Producer configures each session's producer; the sink sets its
	// Guard, OnError and TransactionalID.
	Producer producer.Config
	// Slot names the slot in the exactly-once progress.
	Slot string
	// BatchSize and BatchTimeout shape the batches.
	BatchSize    int
	BatchTimeout time.Duration
	// RetryBackoff, doubling up to MaxRetryBackoff, paces the retries of
	// a failed write.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// TopicUnavailableGrace is how long a missing or unwritable topic is
	// retried; then StopOnUnavailable stops the relay, or its records are
	// dead-lettered.
	TopicUnavailableGrace time.Duration
	StopOnUnavailable     bool
	// StopOnInvalid stops the relay on a record Kafka refuses for good,
	// rather than dead-letter it with DeadLetters.
	StopOnInvalid bool
	DeadLetters   *decode.DeadLetters
	// ProgressTopic is the exactly-once progress topic.
	ProgressTopic string
	// Logger receives the sink's logs.
	Logger *slog.Logger
}
