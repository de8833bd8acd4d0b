package relay

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go/sasl"
)

// InvalidPolicy says what the relay does with a row it cannot publish
// (value over the size limit, NULL in a required column, unsupported type).
type InvalidPolicy string

const (
	// InvalidDeadLetter publishes the row to the dead-letter topic with the
	// reason in headers, counts and logs it, and goes on. The default.
	InvalidDeadLetter InvalidPolicy = "dlq"
	// InvalidStop stops the relay with an error naming the row; its WAL
	// position is not acknowledged, so it is read again after a restart.
	InvalidStop InvalidPolicy = "stop"
)

// Config configures a Relay. DatabaseURL and Brokers are required; every
// other field has a default.
type Config struct {
	// DatabaseURL is a libpq URL or keyword/value string for the service
	// database. The relay adds replication=database for its replication
	// connection. Its password never appears in logs or errors. Required.
	DatabaseURL string
	// Brokers are Kafka bootstrap addresses ("host:port"). Required.
	Brokers []string

	// Table is the outbox table, "table" or "schema.table". Defaults to
	// "public.outbox".
	Table string
	// Slot is the logical replication slot. Defaults to "pgoutbox".
	Slot string
	// Publication is the publication the slot decodes. Defaults to
	// "pgoutbox".
	Publication string
	// NoCreate stops Run from creating a missing slot or publication; Run
	// then fails with an error naming what is missing. Defaults to false
	// (create when missing).
	NoCreate bool

	// TopicTemplate names the topic of a row without an explicit topic;
	// "{aggregate_type}" and "{event_type}" are replaced. Defaults to
	// "outbox.{aggregate_type}".
	TopicTemplate string
	// DeadLetterTopic receives rows that cannot be published. Defaults to
	// "outbox.dlq".
	DeadLetterTopic string
	// OnInvalid is the policy for rows that cannot be published. Defaults
	// to InvalidDeadLetter.
	OnInvalid InvalidPolicy
	// MaxMessageBytes is the largest record value the relay sends; larger
	// rows are invalid. Keep it at or below the broker's message.max.bytes.
	// Defaults to 1000000.
	MaxMessageBytes int

	// BatchSize is the most events sent to Kafka in one write. Defaults to
	// 5000.
	BatchSize int
	// BatchTimeout is how long a partial batch waits for more events before
	// it is sent. Defaults to 5ms.
	BatchTimeout time.Duration
	// Compression is the Kafka compression codec: "none", "gzip", "snappy",
	// "lz4" or "zstd". Defaults to "none".
	Compression string
	// TLS enables TLS to the brokers when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// SASL authenticates to the brokers when non-nil (kafka-go plain or
	// scram mechanisms). Defaults to none.
	SASL sasl.Mechanism
	// WriteTimeout bounds one Kafka write attempt. Defaults to 10s.
	WriteTimeout time.Duration
	// RetryBackoff is the first wait after a failed Kafka write or a lost
	// replication connection; it doubles up to MaxRetryBackoff. Defaults to
	// 100ms.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps RetryBackoff. Defaults to 10s.
	MaxRetryBackoff time.Duration

	// StatusInterval is the longest time between two standby status
	// updates to the server. Defaults to 3s.
	StatusInterval time.Duration

	// PruneAfter deletes published outbox rows older than this, in small
	// batches; zero disables pruning. Defaults to 0.
	PruneAfter time.Duration
	// PruneInterval is the time between two prune passes. Defaults to 1m.
	PruneInterval time.Duration
	// PruneBatchSize is the most rows one prune statement deletes. Defaults
	// to 1000.
	PruneBatchSize int

	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the relay's metrics (see the package doc). nil
	// means the metrics are not registered anywhere.
	Registerer prometheus.Registerer
}
