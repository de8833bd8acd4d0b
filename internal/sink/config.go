package sink

import (
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
)

// Config is what the sink takes of relay.Config (whose fields document
// each); package relay derives it.
type Config struct {
	// Publisher names the broker's publisher (publish.New): empty is
	// publish.Default, Kafka.
	Publisher string
	// Settings are the publisher's own settings (kafkapub.Config for
	// Kafka); the sink's session gives it the liveness guard.
	Settings any
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
	// StopOnInvalid stops the relay on a record the broker refuses for
	// good, rather than dead-letter it with DeadLetters.
	StopOnInvalid bool
	DeadLetters   *decode.DeadLetters
	// TransactionTimeout bounds an exactly-once transaction: the sink
	// commits one open for half of it.
	TransactionTimeout time.Duration
	// ProgressTopic is where the exactly-once progress is kept, named in
	// logs and status (the Kafka publisher's settings hold it too).
	ProgressTopic string
	// Logger receives the sink's logs.
	Logger *slog.Logger
}
