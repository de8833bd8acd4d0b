package relaytrace

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Hooks, called from the relay's reader and sink goroutines when set.
// Set them before the relay starts; they must be quick, as they run on
// the hot path.
var (
	// Read is called for each event the reader queues: its record, its
	// transaction's commit time (from the WAL, microseconds) and when the
	// WAL message holding it was read from the connection. The record
	// comes by value: a pointer to it would move every event of the
	// reader to the heap, hook set or not.
	Read func(msg kgo.Record, commit, read time.Time)
	// Written is called after each Kafka write the sink makes: its
	// records, when the write started and when it returned, and its
	// error.
	Written func(msgs []*kgo.Record, start, end time.Time, err error)
)
