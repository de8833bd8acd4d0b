package relaycli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
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
	flagTracing         = "tracing"
	flagExactlyOnce     = "exactly-once"
	flagFenceWrites     = "fence-writes"
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

// durationFlag is a duration flag (10s, 5m) of category, read from its
// RELAY_* variable too.
func durationFlag(name, category string, def time.Duration, usage string) cli.Flag {
	return &cli.GenericFlag{Name: name, Category: category, EnvVars: envVar(name), Value: cliutil.NewDuration(def), Usage: usage}
}

// sizeFlag is a byte size flag (64MiB, 64MB or bytes) of category, read
// from its RELAY_* variable too.
func sizeFlag(name, category string, def int64, usage string) cli.Flag {
	return &cli.GenericFlag{Name: name, Category: category, EnvVars: envVar(name), Value: cliutil.NewSize(def), Usage: usage}
}

// stringFlag is a string flag of category, read from its RELAY_* variable
// too.
func stringFlag(name, category, def, usage string) cli.Flag {
	return &cli.StringFlag{Name: name, Category: category, EnvVars: envVar(name), Value: def, Usage: usage}
}

// boolFlag is a boolean flag of category, read from its RELAY_* variable
// too.
func boolFlag(name, category, usage string) cli.Flag {
	return &cli.BoolFlag{Name: name, Category: category, EnvVars: envVar(name), Usage: usage}
}

// intFlag is an integer flag of category, read from its RELAY_* variable
// too.
func intFlag(name, category string, def int, usage string) cli.Flag {
	return &cli.IntFlag{Name: name, Category: category, EnvVars: envVar(name), Value: def, Usage: usage}
}

// databaseFlags are shared by every command. Flags are built afresh per run:
// urfave/cli stores parsed values in them.
func databaseFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagDatabaseURL, catDatabase, "",
			"Postgres URL or key=value string of the service database (required; its password is never printed). Prefer RELAY_DATABASE_URL or RELAY_DATABASE_URL_FILE (a file holding it): a flag is visible in ps"),
		stringFlag(flagTable, catDatabase, relay.DefaultTable, "outbox table, table or schema.table"),
		stringFlag(flagTableFormat, catDatabase, string(relaytype.TableFormats[0]),
			"column layout of the outbox table, one of "+relay.TableFormatList()+": debezium is a table of Debezium's Outbox Event Router (id, aggregatetype, aggregateid, type, payload; relay setup then checks it and creates only the state table)"),
		stringFlag(flagSlot, catDatabase, relay.DefaultSlot, "logical replication slot"),
		stringFlag(flagPublication, catDatabase, relay.DefaultPublication, "publication the slot decodes"),
		boolFlag(flagRequireTLS, catDatabase,
			"refuse a database URL that may reach a remote host without verified TLS (sslmode=verify-full or verify-ca)"),
		stringFlag(flagLogLevel, catOps, "info", "log level: debug, info, warn or error"),
		stringFlag(flagLogFormat, catOps, "text", "log format on stderr: text or json"),
	}
}

// runFlags are the flags of `relay run` besides databaseFlags: the
// publishing ones and those of a streaming relay only.
func runFlags() []cli.Flag {
	return append(publishFlags(), streamingFlags()...)
}

// publishFlags are the flags of every command that publishes outbox rows
// (run, recover, backfill): the sink, Kafka, topics, invalid rows and
// batching.
func publishFlags() []cli.Flag {
	return append(sinkFlags(), append([]cli.Flag{
		brokersFlag("Kafka bootstrap brokers, host:port, comma separated (required)"),
		&cli.StringFlag{Name: flagTopicTemplate, Category: catKafka, EnvVars: envVar(flagTopicTemplate),
			Usage: "topic of a row without a topic column value; {aggregate_type} and {event_type} are replaced (default: the table format's own, " + formatTemplates() + ")"},
		stringFlag(flagDLQTopic, catKafka, relay.DefaultDeadLetterTopic,
			"dead-letter topic for rows that cannot be published (reason in headers)"),
		&cli.StringSliceFlag{Name: flagAllowedTopics, Category: catKafka, EnvVars: envVar(flagAllowedTopics),
			Usage: "topic prefixes rows may publish to, comma separated; a row for any other topic is dead-lettered (bad-topic), so no other topic is written or created (default: any legal topic but the dead-letter topic)"},
		stringFlag(flagOnInvalid, catKafka, string(relay.InvalidDeadLetter),
			"what to do with a row that cannot be published: dead-letter (dead-letter it and go on) or stop (exit with an error, nothing acknowledged past it)"),
		sizeFlag(flagMaxMessageBytes, catKafka, relay.DefaultMaxMessageBytes,
			"largest record value sent; larger rows are invalid (keep it at or below the broker's message.max.bytes)"),
		stringFlag(flagCompression, catKafka, relay.Compressions[0], "compression codec, one of "+strings.Join(relay.Compressions, ", ")),
		durationFlag(flagWriteTimeout, catKafka, relay.DefaultWriteTimeout,
			"how long a broker may wait for the in-sync replicas before answering a produce request"),
		durationFlag(flagTopicGrace, catKafka, relay.DefaultTopicUnavailableGrace,
			"how long to retry writes to a topic that does not exist or may not be written before --on-unavailable-topic applies"),
		stringFlag(flagOnUnavailable, catKafka, string(relay.UnavailableDeadLetter),
			"what to do with a record whose topic is still unavailable after --topic-unavailable-grace: dead-letter (dead-letter it as topic-unavailable and go on) or stop (exit with an error, nothing acknowledged past it)"),
		boolFlag(flagNoAutoCreate, catKafka,
			"never ask the brokers to create a missing topic (a row for one is topic-unavailable); recommended in production"),

		intFlag(flagBatchSize, catBatching, relay.DefaultBatchSize, "most events in one Kafka write"),
		sizeFlag(flagBufferBytes, catBatching, relay.DefaultBufferBytes,
			"most record bytes (key, value, headers) held between the WAL reader and Kafka, queued or being written; bounds memory with large payloads"),
		durationFlag(flagBatchTimeout, catBatching, relay.DefaultBatchTimeout,
			"how long a partial batch waits for more events once the queue is empty (0: adaptive, send as soon as the previous write is done; wait up to 1ms more at a steady 2,000+ events/s, else up to 500µs only when 3+ events came during it)"),

		boolFlag(flagCloudEvents, catKafka,
			"add CloudEvents headers (Kafka binding, binary content mode): ce_specversion, ce_id, ce_source, ce_type, ce_time, ce_subject, content-type, and ce_traceparent/ce_tracestate from the row's trace context"),
		stringFlag(flagCESource, catKafka, "",
			"the ce_source attribute with --cloudevents (default /pgoutbox/DATABASE/SCHEMA.TABLE)"),
		stringFlag(flagInstanceID, catOps, "",
			"when set, sent in a relay-instance header of every record, to tell which relay process wrote it (e.g. the pod name)"),
		boolFlag(flagTracing, catOps,
			"record an OpenTelemetry send span per Kafka write, linked to each row's creation context, exported over OTLP/HTTP as the standard "+
				"OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout), OTEL_TRACES_SAMPLER(_ARG), OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES variables say (see docs/tracing.md); off: no cost"),
	}, kafkaflags.Flags(envName, catKafka)...)...)
}

// exactlyOnceFlags are the flags that say whether and where the relays of
// the slot record exactly-once progress: relay run's, and relay status's
// (which reads the progress).
func exactlyOnceFlags() []cli.Flag {
	return []cli.Flag{
		boolFlag(flagExactlyOnce, catKafka,
			"write each batch as one Kafka transaction with a progress record: a read_committed consumer sees every row once across relay crashes and takeovers (default: at-least-once, idempotent producer)"),
		stringFlag(flagProgressTopic, catKafka, contract.DefaultProgressTopic,
			"--exactly-once: compacted topic of the progress records (created with one partition when missing)"),
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
		boolFlag(flagNoCreate, catDatabase, "do not create a missing slot or publication; fail naming what is missing"),
		boolFlag(flagFenceWrites, catKafka,
			"at-least-once: write each batch as a Kafka transaction of an ID the slot's relays share, so that a relay that lost the slot (frozen, then resumed) cannot land a record after its successor's; needs Write on that transactional ID, and consumers reading read_committed"),
		durationFlag(flagStatusInterval, catBatching, relay.DefaultStatusInterval,
			"longest time between two standby status updates (acknowledgements) to Postgres"),
		durationFlag(flagShutdownTimeout, catBatching, relay.DefaultShutdownTimeout,
			"on SIGINT/SIGTERM, how long to wait for Kafka to acknowledge what is in flight before confirming what was acknowledged and exiting"),
		durationFlag(flagPruneAfter, catPrune, 0, "delete published outbox rows older than this (0 disables pruning)"),
		durationFlag(flagPruneInterval, catPrune, relay.DefaultPruneInterval, "time between two prune passes"),
		intFlag(flagPruneBatchSize, catPrune, relay.DefaultPruneBatchSize, "most rows one prune statement deletes"),
		stringFlag(flagMetricsAddr, catOps, DefaultMetricsAddr,
			"address serving /metrics, /healthz and /readyz (empty disables)"),
		durationFlag(flagLagPoll, catOps, relay.DefaultLagPollInterval,
			"how often to read pg_replication_slots for the slot lag metrics"),
		durationFlag(flagStandbyRetry, catOps, relay.DefaultStandbyRetryInterval,
			"while another relay streams the slot, how often this one (a standby) tries to take over"),
		durationFlag(flagTxnTimeout, catKafka, relay.DefaultTransactionTimeout,
			"--exactly-once: how long the brokers keep a relay's Kafka transaction open before aborting it (transaction.timeout.ms)"),
		durationFlag(flagHeartbeat, catOps, 0,
			"emit a pg_logical_emit_message heartbeat at this interval so the slot advances on a database without writes (0 disables)"),
	}...)
}

// envName is envVar's single name, as kafkaflags wants it.
func envName(flag string) string { return envVar(flag)[0] }

// formatTemplates lists each table format's default topic template, for
// --topic-template's usage.
func formatTemplates() string {
	var b strings.Builder
	for i, f := range relaytype.TableFormats {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", f, relay.TopicTemplateOf(f))
	}
	return b.String()
}
