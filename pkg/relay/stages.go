package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/wal"
)

// Config is the only configuration of the relay: no stage sees it. New
// (and each administrative call) derives from it, with its defaults, the
// small config each stage declares and reads, here and nowhere else.

// stageConfigs are the stage configs of one Relay, derived once by New.
type stageConfigs struct {
	decode decode.Config
	wal    wal.Config
	sink   sink.Config
	slot   *slotstate.Config
	admin  admin.Config
}

// deriveStages is c's stage configs, dead letters counted in m; its error
// is a SASL configuration that does not build.
func deriveStages(c *Config, m *relaymetrics.Metrics) (stageConfigs, error) {
	pc, err := kafkaConn(c)
	if err != nil {
		return stageConfigs{}, err
	}
	dl := deadLetters(c, m.Invalid)
	return stageConfigs{decode: decodeConfig(c), wal: walConfig(c, dl), sink: sinkConfig(c, pc, dl), slot: slotConfig(c),
		admin: adminOf(c, pc, nil)}, nil
}

// decodeConfig is the decoder's part of c.
func decodeConfig(c *Config) decode.Config {
	table, _ := pgname.Parse(c.Table, "public")
	return decode.Config{
		Table:             c.Table,
		TableFormat:       c.TableFormat,
		TopicTemplate:     c.TopicTemplate,
		DeadLetterTopic:   c.DeadLetterTopic,
		ProgressTopic:     c.Kafka.ProgressTopic,
		AllowedTopics:     c.AllowedTopics,
		ReservedTopic:     c.ReservedTopic,
		RelayTables:       migrate.RelayTables(table),
		MaxMessageBytes:   c.MaxMessageBytes,
		StopOnInvalid:     c.OnInvalid == InvalidStop,
		CloudEvents:       c.CloudEvents,
		CloudEventsSource: c.CloudEventsSource,
		Logger:            c.Logger,
	}
}

// deadLetters is c's dead-letter shaping, counting in invalid.
func deadLetters(c *Config, invalid *prometheus.CounterVec) *decode.DeadLetters {
	return &decode.DeadLetters{Topic: c.DeadLetterTopic, MaxMessageBytes: c.MaxMessageBytes, InstanceID: c.InstanceID,
		Invalid: invalid, Logger: c.Logger}
}

// walConfig is the WAL reader's part of c; dl shapes its dead letters.
func walConfig(c *Config, dl *decode.DeadLetters) wal.Config {
	return wal.Config{BatchSize: c.BatchSize, StageFor: stageFor(c), StopOnInvalid: c.OnInvalid == InvalidStop, DeadLetters: dl,
		ExactlyOnce: c.ExactlyOnce, InstanceID: c.InstanceID, Logger: c.Logger}
}

// maxStageFor bounds how long the WAL reader holds a transaction's events
// for the rest of it (wal.Config.StageFor).
const maxStageFor = time.Second

// stageFor is how long the WAL reader holds a transaction's events for
// the rest of it: a second, and in exactly-once mode at most a quarter of
// the transaction timeout, so they join the Kafka transaction the sink
// commits at half of it (see sink.Sink.Run).
func stageFor(c *Config) time.Duration {
	if c.ExactlyOnce && c.Kafka.TransactionTimeout > 0 {
		return min(maxStageFor, c.Kafka.TransactionTimeout/4)
	}
	return maxStageFor
}

// sinkConfig is the sink's part of c, connecting as pc says (kafkaConn);
// dl shapes its dead letters.
func sinkConfig(c *Config, pc producer.Config, dl *decode.DeadLetters) sink.Config {
	pc.Compression = c.Kafka.Compression
	pc.MaxBufferedBytes = c.BufferBytes + c.MaxMessageBytes + 1<<20 // the budget bounds it first
	pc.MaxMessageBytes = c.MaxMessageBytes
	pc.RequestTimeout = c.Kafka.WriteTimeout
	pc.AutoCreateTopics = !c.Kafka.NoAutoCreateTopics
	pc.TransactionTimeout = c.Kafka.TransactionTimeout
	pc.Logger = c.Logger
	return sink.Config{
		Publisher:             c.Sink,
		Settings:              sinkSettings(c, kafkapub.Config{Producer: pc, ProgressTopic: c.Kafka.ProgressTopic}),
		Slot:                  c.Slot,
		BatchSize:             c.BatchSize,
		BatchTimeout:          c.BatchTimeout,
		RetryBackoff:          c.RetryBackoff,
		MaxRetryBackoff:       c.MaxRetryBackoff,
		TopicUnavailableGrace: c.TopicUnavailableGrace,
		StopOnUnavailable:     c.OnUnavailableTopic == UnavailableStop,
		StopOnInvalid:         c.OnInvalid == InvalidStop,
		DeadLetters:           dl,
		TransactionTimeout:    c.Kafka.TransactionTimeout,
		ProgressTopic:         c.Kafka.ProgressTopic,
		Logger:                c.Logger,
	}
}

// slotConfig is the slot code's part of c.
func slotConfig(c *Config) *slotstate.Config {
	return &slotstate.Config{DatabaseURL: c.DatabaseURL, Slot: c.Slot, Publication: c.Publication, Table: c.Table,
		TableFormat: c.TableFormat, NoCreate: c.NoCreate, PruneAfter: c.PruneAfter, Logger: c.Logger}
}

// adminOf is the administrative calls' part of c, connecting to Kafka as
// pc says; kafkaErr is why they cannot (nil: they can).
func adminOf(c *Config, pc producer.Config, kafkaErr error) admin.Config {
	return admin.Config{
		Config:         *slotConfig(c),
		Decode:         decodeConfig(c),
		DeadLetters:    *deadLetters(c, nil),
		Sink:           sinkConfig(c, pc, nil),
		ExactlyOnce:    c.ExactlyOnce,
		BackfillOnGap:  c.OnGap == GapBackfill,
		BackfillMargin: c.BackfillMargin,
		KafkaErr:       kafkaErr,
	}
}

// adminConfig is cfg, with its defaults, as the administrative calls read
// it. Only cfg's own problems are errors: a call that needs Kafka reports
// the missing brokers or a SASL configuration that does not build itself
// (admin.Config.KafkaErr), so Setup and Teardown work without them.
func adminConfig(cfg *Config) (admin.Config, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return admin.Config{}, err
	}
	var pc producer.Config
	kafkaErr := c.CheckBrokers()
	if kafkaErr == nil {
		pc, kafkaErr = kafkaConn(&c)
	}
	return adminOf(&c, pc, kafkaErr), nil
}
