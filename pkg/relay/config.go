package relay

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Config configures a Relay. DatabaseURL and Kafka.Brokers are required;
// every other field has a default. The settings of the Kafka client are
// grouped in Kafka; the others are the database's and the relay's own.
type Config struct {
	// DatabaseURL is a libpq URL or keyword/value string for the service
	// database. The relay adds replication=database for its replication
	// connection. Its password never appears in logs or errors. Required.
	DatabaseURL string
	// RequireTLS refuses a DatabaseURL that may reach a non-local host
	// without TLS or without verifying the server's certificate (anything
	// but sslmode=verify-ca or verify-full). Without it, New logs a warning
	// naming such hosts. Unix sockets and loopback addresses are exempt.
	RequireTLS bool

	// Table is the outbox table, "table" or "schema.table". Defaults to
	// "public.outbox".
	Table string
	// Slot is the logical replication slot. Defaults to "pgoutbox".
	Slot string
	// Publication is the publication the slot decodes. Defaults to
	// "pgoutbox".
	Publication string
	// TableFormat is the column layout of Table:
	// relaytype.TableFormatPgoutbox, or relaytype.TableFormatDebezium for a
	// table in the shape of Debezium's Outbox Event Router. Setup creates a table of the pgoutbox format only; it
	// checks an existing table of either. Defaults to relaytype.TableFormatPgoutbox.
	TableFormat relaytype.TableFormat
	// NoCreate stops Run from creating a missing slot or publication; Run
	// then fails with an error naming what is missing. Defaults to false
	// (create when missing).
	NoCreate bool

	// TopicTemplate names the topic of a row without an explicit topic;
	// "{aggregate_type}" and "{event_type}" are replaced. Defaults to
	// "outbox.{aggregate_type}" (relaytype.DefaultTopicTemplate), and to
	// "outbox.event.{aggregate_type}" (relaytype.DefaultDebeziumTopicTemplate, the
	// router's route.topic.replacement) for relaytype.TableFormatDebezium.
	TopicTemplate string
	// DeadLetterTopic receives rows that cannot be published. Defaults to
	// "outbox.dlq".
	DeadLetterTopic string
	// AllowedTopics, when set, are the topic prefixes rows may publish to:
	// a row whose topic (explicit or rendered) starts with none of them is
	// dead-lettered with reason bad-topic, so no topic outside them is
	// written or auto-created. A row naming DeadLetterTopic is
	// dead-lettered the same way whether or not this is set. Defaults to
	// none: every legal topic name but DeadLetterTopic.
	AllowedTopics []string
	// ReservedTopic, when set, reports the topics that other relays
	// write, which no row may publish to: a row routed to one is
	// dead-lettered with reason bad-topic, as for DeadLetterTopic. relay
	// run --config reserves every source's dead-letter and progress
	// topics for all the sources of the file. It is called for each row
	// and must be safe for concurrent use. Topics under "pgoutbox.fleet."
	// (a spread fleet's group, pgoutbox.fleet.GROUP, which only relays
	// use), the default progress topic "pgoutbox.progress" and
	// DeadLetterTopic are reserved whether or not it is set.
	// Defaults to nil: none besides those.
	ReservedTopic func(topic string) bool
	// OnInvalid is the policy for rows that cannot be published. Defaults
	// to InvalidDeadLetter.
	OnInvalid InvalidPolicy
	// MaxMessageBytes is the largest record the relay sends, counting key,
	// value and headers; larger rows are invalid (reason too-large). Keep
	// it at or below the broker's message.max.bytes; a record the broker
	// still rejects as too large is invalid too (dead-lettered, or stops
	// the relay under InvalidStop). Defaults to 1000000.
	MaxMessageBytes int

	// BatchSize is the most events sent to Kafka in one write. Defaults to
	// 1000.
	BatchSize int
	// BufferBytes bounds the record bytes (key, value and headers) held
	// between the WAL reader and Kafka: the queue plus the batch being
	// written. While it is full the reader waits, still sending status
	// updates. A record larger than BufferBytes passes alone. The
	// process's peak memory stays under about twice this plus 40 MiB
	// (`relay run` sets the Go soft memory limit to 1.25 × BufferBytes +
	// 16 MiB unless GOMEMLIMIT is set; see docs/kafka.md). With
	// SharedBuffer, it caps this relay's share of it. Defaults to 16 MiB.
	BufferBytes int
	// SharedBuffer, when set, is a byte budget this relay shares with the
	// other relays of the process that are given it (relay.NewSharedBuffer;
	// `relay run --config` gives one to every source): the relay takes its
	// record bytes from it, at most BufferBytes, rather than from a buffer
	// of its own, so the process's memory is bounded by the budget, not by
	// BufferBytes per relay. Defaults to nil: a buffer of BufferBytes of
	// its own.
	SharedBuffer relaytype.SharedBuffer
	// BatchTimeout is how long a partial batch waits for more events before
	// it is sent, once the queue is empty. Zero (the default) is adaptive
	// batching: a batch is sent as soon as the previous write is done,
	// with every event queued meanwhile; it waits up to 1ms for more at a
	// steady rate of 2,000 events a second or more (counted over 100ms),
	// and otherwise up to 500µs only when three or more events were queued
	// during that write.
	BatchTimeout time.Duration
	// RetryBackoff is the first wait after a failed Kafka write or a lost
	// replication connection; it doubles up to MaxRetryBackoff. Defaults to
	// 100ms.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps RetryBackoff. Defaults to 10s.
	MaxRetryBackoff time.Duration
	// TopicUnavailableGrace is how long the relay keeps retrying a write
	// that fails because its topic does not exist
	// (UNKNOWN_TOPIC_OR_PARTITION) or may not be written
	// (TOPIC_AUTHORIZATION_FAILED), for the operator to provision the
	// topic or grant the ACL, before OnUnavailableTopic applies. Defaults
	// to 5m.
	TopicUnavailableGrace time.Duration
	// OnUnavailableTopic is what the relay does with a record whose topic
	// is still unavailable after TopicUnavailableGrace. Defaults to
	// UnavailableDeadLetter (reason topic-unavailable).
	OnUnavailableTopic UnavailablePolicy

	// ExactlyOnce writes each flush as one Kafka transaction with a
	// progress record on ProgressTopic, so that a read_committed consumer
	// sees every outbox row once, across relay crashes, restarts and
	// takeovers (see docs/semantics.md). Defaults to false:
	// at-least-once, with the idempotent producer.
	ExactlyOnce bool
	// FenceWrites, in at-least-once mode, writes each Kafka write call as
	// a Kafka transaction of a transactional ID the slot's relays share
	// (the exactly-once progress key), initialised when a relay takes
	// the slot: a write a relay that lost the slot had already started
	// (frozen, then resumed) is refused or aborted, never committed after
	// its successor's records. The brokers must grant the relay Write on
	// that transactional ID, and consumers must read read_committed to be
	// spared the aborted records. Exactly-once mode is fenced this way
	// already. Defaults to false: the idempotent producer, which nothing
	// at the brokers fences (see docs/liveness.md).
	FenceWrites bool

	// StatusInterval is the longest time between two standby status
	// updates to the server; a third of the liveness bound when that is
	// shorter (see docs/liveness.md). Defaults to 3s.
	StatusInterval time.Duration
	// ShutdownTimeout bounds how long a stopping relay waits for Kafka to
	// acknowledge what is in flight before it confirms the final position
	// and returns. Defaults to 10s.
	ShutdownTimeout time.Duration

	// LagPollInterval is how often the relay reads pg_replication_slots and
	// pg_current_wal_lsn() on a regular connection for the slot metrics
	// (pgoutbox_relay_slot_*). Polling also runs while the relay is a
	// standby. Defaults to 10s (a typical scrape interval; each poll is one
	// cheap catalog query).
	LagPollInterval time.Duration
	// StandbyRetryInterval is how often a relay whose slot is streamed by
	// another process (a standby) tries to take it over. A standby takes
	// over within about this long after the active relay's connection
	// ends. Defaults to 1s.
	StandbyRetryInterval time.Duration
	// HeartbeatInterval, when positive, makes the streaming relay emit a
	// transactional pg_logical_emit_message with prefix
	// "pgoutbox.heartbeat" (which it does not publish) at this interval,
	// so the slot advances and the pipeline is exercised on a database
	// without other writes (see Heartbeats in package relay's doc). Defaults
	// to 0: off.
	HeartbeatInterval time.Duration

	// OnGap is what Run does when the slot cannot resume where the relay
	// left off (see docs/failover.md). Defaults to GapStop.
	OnGap GapPolicy
	// BackfillMargin is how far before the last confirmed commit time a
	// recovery starts publishing rows from the table (by created_at, which
	// is the transaction's start): longer than the longest transaction
	// that writes the outbox plus the clock skew between primary and
	// standby. Rows in the margin are published again. Pruning keeps rows
	// of the margin too. Defaults to 5m.
	BackfillMargin time.Duration

	// PruneAfter deletes published outbox rows older than this, in small
	// batches; zero disables pruning. Defaults to 0.
	PruneAfter time.Duration
	// PruneInterval is the time between two prune passes. Defaults to 1m.
	PruneInterval time.Duration
	// PruneBatchSize is the most rows one prune statement deletes. Defaults
	// to 1000.
	PruneBatchSize int

	// CloudEvents adds the headers of the CloudEvents Kafka protocol
	// binding's binary content mode to every record: ce_specversion
	// ("1.0"), ce_id (the message ID), ce_source (CloudEventsSource),
	// ce_type (the event type), ce_time (the commit time, RFC 3339 in UTC
	// to the millisecond), ce_subject (the aggregate ID) and content-type
	// (application/json for a json or jsonb payload), and the row's
	// traceparent and tracestate as ce_traceparent and ce_tracestate. A
	// row's headers may then not name ce_* or content-type. Defaults to
	// false.
	CloudEvents bool
	// CloudEventsSource is the ce_source attribute. Defaults to
	// "/pgoutbox/DATABASE/SCHEMA.TABLE", the database of DatabaseURL and
	// Table.
	CloudEventsSource string

	// InstanceID, when set, is sent in a "relay-instance" header of
	// every record, so a reader can tell which relay
	// process wrote it (for example hostname and PID, or the pod name).
	// Defaults to "": no header.
	InstanceID string

	// Sink names the broker the relay publishes to: the publisher
	// registered under that name, which reads its own group of settings
	// of this Config. "kafka" is Kafka (the Kafka group). Defaults to
	// "kafka".
	Sink string
	// SinkURL is the address of the broker Sink names when it is not
	// Kafka: "nats://host:4222" (several separated by commas) for "nats",
	// "rabbitmq-stream://user:password@host:5552/vhost" for "rabbitmq"
	// (docs/sinks.md). It may carry a password and is never logged.
	// Required for those sinks.
	SinkURL string
	// SinkTLS is the TLS and the credentials of the connection to the
	// broker Sink names when it is not Kafka (Kafka's are in Kafka).
	// Defaults to none: plaintext unless SinkURL asks for TLS.
	SinkTLS SinkTLS

	// Kafka configures the Kafka client: the brokers, their TLS and SASL,
	// and the producer's settings. Kafka.Brokers is required (with the
	// Kafka sink).
	Kafka KafkaConfig

	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the relay's metrics (see package relay's doc). nil
	// means the metrics are not registered anywhere. One Relay per
	// registry: New fails when the metrics are registered already.
	Registerer prometheus.Registerer

	// Hooks are called at each stage of the relay's data path (see
	// package relayhook): each value implements one or more of its Hook*
	// interfaces, for example a relayotel.Tracer. Defaults to none: no
	// call, nothing allocated for them.
	Hooks []relayhook.Hook
}

// SinkTLS secures the connection to a sink other than Kafka: NATS
// ("nats") or RabbitMQ ("rabbitmq"). Both brokers read Config; only NATS
// reads CredentialsFile.
type SinkTLS struct {
	// Config enables TLS to the broker when non-nil: its RootCAs verify
	// the broker's certificate (nil: the system's roots), its
	// Certificates are the client's for mutual TLS. Defaults to nil:
	// plaintext, unless the sink URL asks for TLS (tls:// for NATS,
	// rabbitmq-stream+tls:// for RabbitMQ), then TLS with the system's
	// roots.
	Config *tls.Config
	// CredentialsFile is a NATS credentials file (.creds: a user JWT and
	// its NKey seed), read at every connection; its content is never
	// logged. NATS only. Defaults to "": none.
	CredentialsFile string
}

// KafkaConfig is the part of Config that only the Kafka client reads:
// where the brokers are, how to reach and authenticate to them, and how
// the producer writes (compression, timeouts, topic auto-creation, the
// exactly-once progress topic and transactions). The relay's own
// settings (batching, the topics rows go to, the policies) stay in
// Config.
type KafkaConfig struct {
	// Brokers are Kafka bootstrap addresses ("host:port"). Required.
	Brokers []string

	// Compression is the Kafka compression codec: "none", "gzip", "snappy",
	// "lz4" or "zstd". Defaults to "none".
	Compression string
	// TLS enables TLS to the brokers when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// SASL authenticates to the brokers when non-nil (every mechanism of
	// package kafkasasl, AWS_MSK_IAM included). Defaults to none.
	SASL *kafkasasl.Config
	// WriteTimeout is how long a broker may wait for the in-sync replicas
	// before it answers a produce request (the producer waits that long
	// plus 10s for the answer, then retries on a new connection).
	// Defaults to 10s.
	WriteTimeout time.Duration
	// NoAutoCreateTopics stops the relay from asking the brokers to create
	// a topic that does not exist (Metadata's AllowAutoTopicCreation): a
	// record for it is then topic-unavailable. Defaults to false: topics
	// are created where the cluster allows it (auto.create.topics.enable),
	// as `relay dev` and the Quick start rely on.
	NoAutoCreateTopics bool

	// ProgressTopic is the compacted topic of exactly-once progress
	// records (Config.ExactlyOnce), created (one partition,
	// cleanup.policy=compact) when missing. Defaults to
	// "pgoutbox.progress"; no row may publish to that topic, whatever
	// this is set to.
	ProgressTopic string
	// TransactionTimeout is how long the brokers keep an exactly-once
	// (Config.ExactlyOnce) relay's Kafka transaction open before they abort it (a relay that
	// died holding one; a new relay of the slot aborts it at once). The
	// relay commits a transaction open for half of it, inside a WAL
	// transaction if need be, whether or not more events came.
	// Defaults to 40s.
	TransactionTimeout time.Duration
}

// Compressions lists the values of KafkaConfig.Compression.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Defaults of the Config fields.
const (
	DefaultTable                               = "public.outbox"
	DefaultSlot                                = "pgoutbox"
	DefaultPublication                         = "pgoutbox"
	DefaultDeadLetterTopic                     = "outbox.dlq"
	DefaultMaxMessageBytes                     = 1000000
	DefaultBatchSize                           = 1000
	DefaultBufferBytes                         = 16 << 20
	DefaultBatchTimeout          time.Duration = 0
	DefaultWriteTimeout                        = 10 * time.Second
	DefaultRetryBackoff                        = 100 * time.Millisecond
	DefaultMaxRetryBackoff                     = 10 * time.Second
	DefaultTopicUnavailableGrace               = 5 * time.Minute
	DefaultTransactionTimeout                  = 40 * time.Second
	DefaultStatusInterval                      = 3 * time.Second
	DefaultShutdownTimeout                     = 10 * time.Second
	DefaultPruneInterval                       = time.Minute
	DefaultPruneBatchSize                      = 1000
	DefaultBackfillMargin                      = 5 * time.Minute
	DefaultLagPollInterval                     = 10 * time.Second
	DefaultStandbyRetryInterval                = time.Second
)

// InvalidPolicy says what the relay does with a row it cannot publish
// (value over the size limit, NULL in a required column, unsupported type).
type InvalidPolicy string

const (
	// InvalidDeadLetter ("dead-letter") publishes the row to the
	// dead-letter topic with the reason in headers, counts and logs it,
	// and goes on. The default.
	InvalidDeadLetter InvalidPolicy = "dead-letter"
	// InvalidStop ("stop") stops the relay with an error naming the row;
	// its WAL position is not acknowledged, so it is read again after a
	// restart.
	InvalidStop InvalidPolicy = "stop"
)

// UnavailablePolicy says what the relay does with a record whose topic
// stays unavailable (it does not exist, or the relay may not write it)
// for longer than Config.TopicUnavailableGrace.
type UnavailablePolicy string

const (
	// UnavailableDeadLetter ("dead-letter") dead-letters the record with
	// reason topic-unavailable and goes on; later records of the topic
	// are dead-lettered at their first failed write while it stays
	// unavailable. The default: a producer naming a topic that does not
	// exist cannot stop the relay.
	UnavailableDeadLetter UnavailablePolicy = "dead-letter"
	// UnavailableStop ("stop") ends Run with relaytype.ErrTopicUnavailable, the
	// record not confirmed (so a restart after the fix publishes it).
	UnavailableStop UnavailablePolicy = "stop"
)

// GapPolicy says what Run does when it finds a gap (see relaytype.GapError).
type GapPolicy string

const (
	// GapStop ("stop") ends Run with the *relaytype.GapError, streaming nothing.
	// The default.
	GapStop GapPolicy = "stop"
	// GapBackfill ("backfill") recovers the gap as Recover does, then streams.
	GapBackfill GapPolicy = "backfill"
)
