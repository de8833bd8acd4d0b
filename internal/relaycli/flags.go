package relaycli

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Flag names. Each flag also reads the environment variable envVar(name).
const (
	flagDatabaseURL     = "database-url"
	flagTable           = "table"
	flagSlot            = "slot"
	flagPublication     = "publication"
	flagLogLevel        = "log-level"
	flagLogFormat       = "log-format"
	flagBrokers         = "brokers"
	flagNoCreate        = "no-create"
	flagRequireTLS      = "require-tls"
	flagTopicTemplate   = "topic-template"
	flagDLQTopic        = "dlq-topic"
	flagAllowedTopics   = "allowed-topics"
	flagOnInvalid       = "on-invalid"
	flagMaxMessageBytes = "max-message-bytes"
	flagBatchSize       = "batch-size"
	flagBufferBytes     = "buffer-bytes"
	flagBatchTimeout    = "batch-timeout"
	flagTopicGrace      = "topic-unavailable-grace"
	flagOnUnavailable   = "on-unavailable-topic"
	flagNoAutoCreate    = "no-auto-create-topics"
	flagCompression     = "compression"
	flagWriteTimeout    = "write-timeout"
	flagStatusInterval  = "status-interval"
	flagShutdownTimeout = "shutdown-timeout"
	flagPruneAfter      = "prune-after"
	flagPruneInterval   = "prune-interval"
	flagPruneBatchSize  = "prune-batch-size"
	flagMetricsAddr     = "metrics-addr"
	flagLagPoll         = "lag-poll-interval"
	flagStandbyRetry    = "standby-retry-interval"
	flagHeartbeat       = "heartbeat-interval"
	flagInstanceID      = "instance-id"
	flagExactlyOnce     = "exactly-once"
	flagProgressTopic   = "progress-topic"
	flagTxnTimeout      = "transaction-timeout"
	flagTableFormat     = "table-format"
	flagCloudEvents     = "cloudevents"
	flagCESource        = "cloudevents-source"
)

// DefaultMetricsAddr is where `relay run` serves /metrics, /healthz and
// /readyz unless --metrics-addr says otherwise. Not 9187: the relay runs
// next to the database, where postgres_exporter usually holds that port.
const DefaultMetricsAddr = ":9740"

const (
	catDatabase = "Database"
	catKafka    = "Kafka"
	catBatching = "Batching and acknowledgement"
	catPrune    = "Table growth"
	catOps      = "Observability"
)

// envVar returns the environment variable of a flag: --dlq-topic reads
// RELAY_DLQ_TOPIC.
func envVar(name string) []string {
	return []string{"RELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

// databaseFlags are shared by every command. Flags are built afresh per run:
// urfave/cli stores parsed values in them.
func databaseFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagDatabaseURL, Category: catDatabase, EnvVars: envVar(flagDatabaseURL),
			Usage: "Postgres URL or key=value string of the service database (required; its password is never printed). Prefer RELAY_DATABASE_URL or RELAY_DATABASE_URL_FILE (a file holding it): a flag is visible in ps"},
		&cli.StringFlag{Name: flagTable, Category: catDatabase, EnvVars: envVar(flagTable), Value: relay.DefaultTable,
			Usage: "outbox table, table or schema.table"},
		&cli.StringFlag{Name: flagTableFormat, Category: catDatabase, EnvVars: envVar(flagTableFormat), Value: string(relay.TableFormatPgoutbox),
			Usage: "column layout of the outbox table: pgoutbox, or debezium for a table of Debezium's Outbox Event Router (id, aggregatetype, aggregateid, type, payload; relay setup then checks it and creates only the state table)"},
		&cli.StringFlag{Name: flagSlot, Category: catDatabase, EnvVars: envVar(flagSlot), Value: relay.DefaultSlot,
			Usage: "logical replication slot"},
		&cli.StringFlag{Name: flagPublication, Category: catDatabase, EnvVars: envVar(flagPublication), Value: relay.DefaultPublication,
			Usage: "publication the slot decodes"},
		&cli.BoolFlag{Name: flagRequireTLS, Category: catDatabase, EnvVars: envVar(flagRequireTLS),
			Usage: "refuse a database URL that may reach a remote host without verified TLS (sslmode=verify-full or verify-ca)"},
		&cli.StringFlag{Name: flagLogLevel, Category: catOps, EnvVars: envVar(flagLogLevel), Value: "info",
			Usage: "log level: debug, info, warn or error"},
		&cli.StringFlag{Name: flagLogFormat, Category: catOps, EnvVars: envVar(flagLogFormat), Value: "text",
			Usage: "log format on stderr: text or json"},
	}
}

// runFlags are the flags of `relay run` besides databaseFlags: the
// publishing ones and those of a streaming relay only.
func runFlags() []cli.Flag {
	return append(publishFlags(), streamingFlags()...)
}

// publishFlags are the flags of every command that publishes outbox rows
// (run, recover, backfill): Kafka, topics, invalid rows and batching.
func publishFlags() []cli.Flag {
	return append([]cli.Flag{
		brokersFlag("Kafka bootstrap brokers, host:port, comma separated (required)"),
		&cli.StringFlag{Name: flagTopicTemplate, Category: catKafka, EnvVars: envVar(flagTopicTemplate), Value: relay.DefaultTopicTemplate,
			Usage: "topic of a row without a topic column value; {aggregate_type} and {event_type} are replaced (default with --table-format debezium: " + relay.DefaultDebeziumTopicTemplate + ")"},
		&cli.StringFlag{Name: flagDLQTopic, Category: catKafka, EnvVars: envVar(flagDLQTopic), Value: relay.DefaultDeadLetterTopic,
			Usage: "dead-letter topic for rows that cannot be published (reason in headers)"},
		&cli.StringSliceFlag{Name: flagAllowedTopics, Category: catKafka, EnvVars: envVar(flagAllowedTopics),
			Usage: "topic prefixes rows may publish to, comma separated; a row for any other topic is dead-lettered (bad-topic), so no other topic is written or created (default: any legal topic but the dead-letter topic)"},
		&cli.StringFlag{Name: flagOnInvalid, Category: catKafka, EnvVars: envVar(flagOnInvalid), Value: string(relay.InvalidDeadLetter),
			Usage: "what to do with a row that cannot be published: dead-letter (dead-letter it and go on) or stop (exit with an error, nothing acknowledged past it)"},
		&cli.GenericFlag{Name: flagMaxMessageBytes, Category: catKafka, EnvVars: envVar(flagMaxMessageBytes), Value: cliutil.NewSize(relay.DefaultMaxMessageBytes),
			Usage: "largest record value sent; larger rows are invalid (keep it at or below the broker's message.max.bytes)"},
		&cli.StringFlag{Name: flagCompression, Category: catKafka, EnvVars: envVar(flagCompression), Value: "none",
			Usage: "compression codec: none, gzip, snappy, lz4 or zstd"},
		&cli.GenericFlag{Name: flagWriteTimeout, Category: catKafka, EnvVars: envVar(flagWriteTimeout), Value: cliutil.NewDuration(relay.DefaultWriteTimeout),
			Usage: "how long a broker may wait for the in-sync replicas before answering a produce request"},
		&cli.GenericFlag{Name: flagTopicGrace, Category: catKafka, EnvVars: envVar(flagTopicGrace), Value: cliutil.NewDuration(relay.DefaultTopicUnavailableGrace),
			Usage: "how long to retry writes to a topic that does not exist or may not be written before --on-unavailable-topic applies"},
		&cli.StringFlag{Name: flagOnUnavailable, Category: catKafka, EnvVars: envVar(flagOnUnavailable), Value: string(relay.UnavailableDeadLetter),
			Usage: "what to do with a record whose topic is still unavailable after --topic-unavailable-grace: dead-letter (dead-letter it as topic-unavailable and go on) or stop (exit with an error, nothing acknowledged past it)"},
		&cli.BoolFlag{Name: flagNoAutoCreate, Category: catKafka, EnvVars: envVar(flagNoAutoCreate),
			Usage: "never ask the brokers to create a missing topic (a row for one is topic-unavailable); recommended in production"},

		&cli.IntFlag{Name: flagBatchSize, Category: catBatching, EnvVars: envVar(flagBatchSize), Value: relay.DefaultBatchSize,
			Usage: "most events in one Kafka write"},
		&cli.GenericFlag{Name: flagBufferBytes, Category: catBatching, EnvVars: envVar(flagBufferBytes), Value: cliutil.NewSize(relay.DefaultBufferBytes),
			Usage: "most record bytes (key, value, headers) held between the WAL reader and Kafka, queued or being written; bounds memory with large payloads"},
		&cli.GenericFlag{Name: flagBatchTimeout, Category: catBatching, EnvVars: envVar(flagBatchTimeout), Value: cliutil.NewDuration(relay.DefaultBatchTimeout),
			Usage: "how long a partial batch waits for more events once the queue is empty (0: adaptive, send as soon as the previous write is done)"},

		&cli.BoolFlag{Name: flagCloudEvents, Category: catKafka, EnvVars: envVar(flagCloudEvents),
			Usage: "add CloudEvents headers (Kafka binding, binary content mode): ce_specversion, ce_id, ce_source, ce_type, ce_time, ce_subject, content-type"},
		&cli.StringFlag{Name: flagCESource, Category: catKafka, EnvVars: envVar(flagCESource),
			Usage: "the ce_source attribute with --cloudevents (default /pgoutbox/DATABASE/SCHEMA.TABLE)"},
		&cli.StringFlag{Name: flagInstanceID, Category: catOps, EnvVars: envVar(flagInstanceID),
			Usage: "when set, sent in a relay-instance header of every record, to tell which relay process wrote it (e.g. the pod name)"},
	}, kafkaflags.Flags(envName, catKafka)...)
}

// exactlyOnceFlags are the flags that say whether and where the relays of
// the slot record exactly-once progress: relay run's, and relay status's
// (which reads the progress).
func exactlyOnceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: flagExactlyOnce, Category: catKafka, EnvVars: envVar(flagExactlyOnce),
			Usage: "write each batch as one Kafka transaction with a progress record: a read_committed consumer sees every row once across relay crashes and takeovers (default: at-least-once, idempotent producer)"},
		&cli.StringFlag{Name: flagProgressTopic, Category: catKafka, EnvVars: envVar(flagProgressTopic), Value: relay.DefaultProgressTopic,
			Usage: "--exactly-once: compacted topic of the progress records (created with one partition when missing)"},
	}
}

// brokersFlag is the bootstrap brokers flag.
func brokersFlag(usage string) cli.Flag {
	return &cli.StringSliceFlag{Name: flagBrokers, Category: catKafka, EnvVars: envVar(flagBrokers), Usage: usage}
}

// streamingFlags are the flags only `relay run` has: slot creation,
// acknowledgements, shutdown, pruning, metrics, standby, heartbeat and
// exactly-once.
func streamingFlags() []cli.Flag {
	return append(exactlyOnceFlags(), []cli.Flag{
		&cli.BoolFlag{Name: flagNoCreate, Category: catDatabase, EnvVars: envVar(flagNoCreate),
			Usage: "do not create a missing slot or publication; fail naming what is missing"},
		&cli.GenericFlag{Name: flagStatusInterval, Category: catBatching, EnvVars: envVar(flagStatusInterval), Value: cliutil.NewDuration(relay.DefaultStatusInterval),
			Usage: "longest time between two standby status updates (acknowledgements) to Postgres"},
		&cli.GenericFlag{Name: flagShutdownTimeout, Category: catBatching, EnvVars: envVar(flagShutdownTimeout), Value: cliutil.NewDuration(relay.DefaultShutdownTimeout),
			Usage: "on SIGINT/SIGTERM, how long to wait for Kafka to acknowledge what is in flight before confirming what was acknowledged and exiting"},
		&cli.GenericFlag{Name: flagPruneAfter, Category: catPrune, EnvVars: envVar(flagPruneAfter),
			Value: cliutil.NewDuration(0),
			Usage: "delete published outbox rows older than this (0 disables pruning)"},
		&cli.GenericFlag{Name: flagPruneInterval, Category: catPrune, EnvVars: envVar(flagPruneInterval), Value: cliutil.NewDuration(relay.DefaultPruneInterval),
			Usage: "time between two prune passes"},
		&cli.IntFlag{Name: flagPruneBatchSize, Category: catPrune, EnvVars: envVar(flagPruneBatchSize), Value: relay.DefaultPruneBatchSize,
			Usage: "most rows one prune statement deletes"},
		&cli.StringFlag{Name: flagMetricsAddr, Category: catOps, EnvVars: envVar(flagMetricsAddr), Value: DefaultMetricsAddr,
			Usage: "address serving /metrics, /healthz and /readyz (empty disables)"},
		&cli.GenericFlag{Name: flagLagPoll, Category: catOps, EnvVars: envVar(flagLagPoll), Value: cliutil.NewDuration(relay.DefaultLagPollInterval),
			Usage: "how often to read pg_replication_slots for the slot lag metrics"},
		&cli.GenericFlag{Name: flagStandbyRetry, Category: catOps, EnvVars: envVar(flagStandbyRetry), Value: cliutil.NewDuration(relay.DefaultStandbyRetryInterval),
			Usage: "while another relay streams the slot, how often this one (a standby) tries to take over"},
		&cli.GenericFlag{Name: flagTxnTimeout, Category: catKafka, EnvVars: envVar(flagTxnTimeout), Value: cliutil.NewDuration(relay.DefaultTransactionTimeout),
			Usage: "--exactly-once: how long the brokers keep a relay's Kafka transaction open before aborting it (transaction.timeout.ms)"},
		&cli.GenericFlag{Name: flagHeartbeat, Category: catOps, EnvVars: envVar(flagHeartbeat),
			Value: cliutil.NewDuration(0),
			Usage: "emit a pg_logical_emit_message heartbeat at this interval so the slot advances on a database without writes (0 disables)"},
	}...)
}

// envName is envVar's single name, as kafkaflags wants it.
func envName(flag string) string { return envVar(flag)[0] }
