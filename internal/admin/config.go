package admin

import (
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
)

// Config is what the administrative calls read of relay.Config (whose
// fields document each), with its defaults; package relay derives it. The
// slot code's config is embedded: the database, the slot, the publication
// and the table.
type Config struct {
	slotstate.Config
	// Decode builds a backfill's records as the WAL reader builds them.
	Decode decode.Config
	// DeadLetters shapes a backfill's dead letters (NewSink counts them in
	// its metrics).
	DeadLetters decode.DeadLetters
	// Sink writes a backfill's records and reads the exactly-once
	// progress; its Producer (brokers, TLS, SASL) is how every call reads
	// Kafka.
	Sink sink.Config
	// ExactlyOnce makes Status read the progress from Kafka.
	ExactlyOnce bool
	// BackfillOnGap is OnGap GapBackfill: Run may recover a gap, which
	// reads the table.
	BackfillOnGap bool
	// BackfillMargin is how far before the last confirmed commit time a
	// recovery starts publishing rows.
	BackfillMargin time.Duration
	// KafkaErr, when set, is why the calls cannot reach Kafka (no
	// brokers, or a SASL configuration that does not build): Backfill and
	// Recover fail with it, Status reports it as the progress's error.
	KafkaErr error
}

// NewSink is the sink of c counting in m, dead-lettering as c says.
func NewSink(c *Config, m *relaymetrics.Metrics) *sink.Sink {
	sc := c.Sink
	sc.DeadLetters = c.deadLetters(m)
	return sink.NewSink(sc, m)
}

// deadLetters is c's dead-letter shaping, counting in m.
func (c *Config) deadLetters(m *relaymetrics.Metrics) *decode.DeadLetters {
	dl := c.DeadLetters
	dl.Invalid = m.Invalid
	return &dl
}
