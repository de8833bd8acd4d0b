package publish

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// Record is the relay's own record: what the decoder builds from an outbox
// row (or a dead letter), what the sink batches and what a Publisher
// writes. No client library's record type crosses a stage; a publisher
// converts a Record into its client's message inside its own package.
type Record struct {
	// Topic is the destination: a Kafka topic, and for another broker what
	// its publisher maps the name to (a NATS subject, a RabbitMQ stream or
	// exchange).
	Topic string
	// Key is the outbox row's aggregate ID: records of one key stay in
	// order (Kafka: one partition by murmur2). A dead letter reduced to
	// the minimal record has none.
	Key []byte
	// Value is the payload, byte-exact; nil for a dead letter that lost it.
	Value []byte
	// Headers are the message contract's headers (internal/contract), in
	// the order the decoder wrote them, then the row's own.
	Headers []Header
	// Timestamp is the transaction's commit time.
	Timestamp time.Time
	// Pos is where the record's row is in the WAL, the same in every
	// session that reads it: a publisher may derive a broker's
	// deduplication ID from it (a RabbitMQ stream's publishing ID). The
	// zero Position is a record of no WAL transaction (a backfill's).
	Pos Position
}

// Header is one record header. Names are compared as written; the
// contract's names are lower case.
type Header struct {
	Key   string
	Value []byte
}

// Position is the place of an event in the WAL: the Seq-th event (from 0)
// of the transaction whose commit record starts at Final (its BEGIN's
// final LSN). Every session that decodes the transaction gives its events
// the same positions; exactly-once progress and the refusals a session
// remembers are kept by it.
type Position struct {
	Final pglogrepl.LSN
	Seq   int
}
