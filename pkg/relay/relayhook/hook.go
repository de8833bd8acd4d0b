package relayhook

import (
	"iter"
	"time"
)

// Hook is a value that implements one or more of the Hook* interfaces of
// this package. A value that implements none is ignored.
type Hook any

// HookRecordBuilt is called by the relay's reader for each record it built
// from an outbox row or logical message and queued for the sink.
type HookRecordBuilt interface {
	OnRecordBuilt(RecordBuilt)
}

// HookBatchRead is called by the sink for each batch it took off the
// reader's queue, before writing it.
type HookBatchRead interface {
	OnBatchRead(BatchRead)
}

// HookBatchWritten is called by the sink after each Kafka write returned:
// one produce call of the records of a batch (a batch may take several
// calls, and a record that failed is written again in a later one).
type HookBatchWritten interface {
	OnBatchWritten(BatchWritten)
}

// HookTxnCommitted is called by the sink, in exactly-once mode, after each
// Kafka transaction commit returned.
type HookTxnCommitted interface {
	OnTxnCommitted(TxnCommitted)
}

// HookDeadLettered is called by the sink for each dead-letter record Kafka
// acknowledged: a row the relay could not publish, in the dead-letter topic.
type HookDeadLettered interface {
	OnDeadLettered(DeadLettered)
}

// Record is a read-only view of one Kafka record the relay built from an
// outbox row or logical message. The relay implements it; it is valid only
// during the hook call that passes it, and its byte slices must not be
// modified.
type Record interface {
	// Topic is the record's topic.
	Topic() string
	// Key is the record's key (the aggregate ID).
	Key() []byte
	// Value is the record's value (the payload, byte for byte).
	Value() []byte
	// Header returns the value of the first header named name.
	Header(name string) ([]byte, bool)
	// Headers yields each header's name and value, in order.
	Headers() iter.Seq2[string, []byte]
	// Partition is the partition Kafka acknowledged the record in: -1 in
	// HookRecordBuilt, meaningless for a record whose write failed.
	Partition() int32
	// Offset is the record's offset in its partition: -1 in
	// HookRecordBuilt, meaningless for a record whose write failed.
	Offset() int64
	// Commit is the commit time of the row's transaction (the record's
	// timestamp).
	Commit() time.Time
	// CommitLSN is the WAL position of the commit record of the row's
	// transaction.
	CommitLSN() uint64
	// MessageID is the message ID (the message-id header).
	MessageID() string
	// DeadLetter reports whether this is a dead-letter record (it goes to
	// the dead-letter topic instead of the row's own).
	DeadLetter() bool
}

// RecordBuilt is what HookRecordBuilt gets.
type RecordBuilt struct {
	// Record is the record built.
	Record Record
	// Read is when the WAL message holding the row was read from the
	// replication connection.
	Read time.Time
}

// BatchRead is what HookBatchRead gets.
type BatchRead struct {
	// Events is the number of events in the batch (records, and in
	// exactly-once mode the transactions' end markers).
	Events int
	// At is when the sink took the batch.
	At time.Time
}

// BatchWritten is what HookBatchWritten gets.
type BatchWritten struct {
	// Records are the outbox records of the write, in the order written
	// (the exactly-once progress record is not among them).
	Records []Record
	// Errs holds each record's error, nil when Kafka acknowledged it; nil
	// when all were acknowledged.
	Errs []error
	// Start and End are when the write started and returned.
	Start, End time.Time
	// Err is the write's first error (of the call or of a record), nil
	// when Kafka acknowledged every record.
	Err error
	// Transactional reports that the write is part of a Kafka
	// transaction (exactly-once mode): its records are visible to
	// read_committed consumers once HookTxnCommitted reports its commit.
	Transactional bool
}

// TxnCommitted is what HookTxnCommitted gets.
type TxnCommitted struct {
	// Records is the number of outbox records the transaction held.
	Records int
	// Began is when the transaction's first write started; Start and End
	// are when the commit started and returned.
	Began, Start, End time.Time
	// ProgressLSN is the WAL position the transaction's progress record
	// covers: what the relay may confirm once it is committed.
	ProgressLSN uint64
	// Err is the commit's error, nil when it was committed.
	Err error
}

// DeadLettered is what HookDeadLettered gets.
type DeadLettered struct {
	// Record is the dead-letter record, as written (its Topic is the
	// dead-letter topic, its Partition and Offset where it landed).
	Record Record
	// Reason is the reason (the dlq-reason header, for example
	// "too-large"); Detail says more.
	Reason, Detail string
}
