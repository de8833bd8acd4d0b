package relaytype

import "time"

// Defaults of the VerifyOptions fields.
const (
	DefaultVerifyMargin = time.Minute
	// DefaultVerifyMaxSpillBytes is the default VerifyOptions.MaxSpillBytes.
	DefaultVerifyMaxSpillBytes = 10 << 30
	DefaultVerifyGrace         = time.Minute
	DefaultVerifyList          = 20
	DefaultVerifyMaxInMemory   = 200_000
	// DefaultVerifyMaxTopics and DefaultVerifyMaxTopicBytes are the
	// defaults of VerifyOptions.MaxTopics and MaxTopicBytes.
	DefaultVerifyMaxTopics     = 10_000
	DefaultVerifyMaxTopicBytes = 1 << 20
)

// VerifyOptions selects the window Verify audits and bounds its resources.
type VerifyOptions struct {
	// From and To bound the window: outbox rows created at or after From
	// and before To. Required.
	From, To time.Time
	// Margin is how far before From the topics are read by record
	// timestamp. Defaults to 1m; negative means none.
	Margin time.Duration
	// Grace: a row created less than this before Verify started and not
	// yet in Kafka is pending, not missing. Defaults to 1m; negative
	// means none.
	Grace time.Duration
	// FullKeys lists keys, business keys and aggregate IDs whole in the
	// report; by default they are shortened to a prefix, the length and a
	// hash (equal keys give equal results), as they are often personal
	// data.
	FullKeys bool
	// List is how many missing rows, duplicates, mismatches and order
	// breaks the report names (each). Defaults to 20; negative for none.
	List int
	// MaxInMemory bounds the entries (rows, records, first deliveries)
	// each of Verify's three sorts keeps in memory; beyond it they spill
	// to sorted files in SpillDir. Defaults to 200,000.
	MaxInMemory int
	// MaxSpillBytes caps what Verify writes to its spill files; past it,
	// it fails. Defaults to 10 GiB; negative means no cap.
	MaxSpillBytes int64
	// SpillDir holds the spill files, removed before Verify returns.
	// Defaults to os.TempDir().
	SpillDir string
	// MaxTopics and MaxTopicBytes bound the distinct topics the window's
	// rows route to, by number and by the bytes of their names: Verify
	// keeps each name in memory and reads each topic, so rows naming a
	// new topic each would otherwise grow it without bound. Past either,
	// Verify fails with ErrVerifyTopics. Default to 10,000 and 1 MiB;
	// negative means no cap.
	MaxTopics     int
	MaxTopicBytes int64
}

// VerifyReport is what Verify found. Counts cover the whole window; the
// lists name the first VerifyOptions.List of each.
type VerifyReport struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// PrunedBefore is the relay's prune high-water mark when it falls
	// after From: rows created before it may have been deleted, and verify
	// cannot tell them from rows never written.
	PrunedBefore *time.Time `json:"pruned_before,omitempty"`

	// Rows are the outbox rows of the window still in the table.
	Rows int64 `json:"rows"`
	// Found are the rows with at least one record in their topic.
	Found int64 `json:"found"`
	// DeadLettered are the rows found only in the dead-letter topic.
	DeadLettered int64 `json:"dead_lettered"`
	// Missing are rows in no topic, created more than VerifyOptions.Grace before the
	// run; Pending the newer ones (the relay may not have caught up).
	Missing int64 `json:"missing"`
	Pending int64 `json:"pending"`
	// InvalidIDs are rows whose id is not a UUID (the relay
	// dead-letters them under no message ID: they cannot be matched).
	InvalidIDs int64 `json:"invalid_ids"`
	// Duplicates are the records beyond the first of a row (all topics);
	// DuplicatedRows the rows that have them.
	Duplicates     int64 `json:"duplicates"`
	DuplicatedRows int64 `json:"duplicated_rows"`
	// Mismatched are records whose key, business-key header or topic
	// disagree with their row.
	Mismatched int64 `json:"mismatched"`
	// OrderBreaks are first deliveries of an aggregate (in its topic and
	// partition) whose commit time (record timestamp) is earlier than
	// that of a first delivery before them.
	OrderBreaks int64 `json:"order_breaks"`

	// RecordsRead are the records read from the topics (control records
	// not counted); RecordsWithoutID those without a message-id header
	// that parses as a UUID; Unmatched those whose ID is no row of the
	// window (rows outside it, read through the margin, logical messages,
	// rows deleted from the table); Unverifiable the unmatched ones with
	// a timestamp in [From, PrunedBefore): records of rows pruning may
	// have deleted.
	RecordsRead      int64 `json:"records_read"`
	RecordsWithoutID int64 `json:"records_without_id"`
	Unmatched        int64 `json:"unmatched"`
	Unverifiable     int64 `json:"unverifiable"`

	// Topics are the topics read with the offsets read from each
	// partition; MissingTopics the routed topics that do not exist.
	// MissingTopics lists the first VerifyOptions.List of them (in the
	// order the rows route to them), MissingTopicCount counts them all.
	Topics            []VerifyTopicRange `json:"topics"`
	MissingTopics     []string           `json:"missing_topics,omitempty"`
	MissingTopicCount int                `json:"missing_topic_count"`
	// UnreadableTopics are the routed topics verify may not read (an
	// authorization error, say); UnreadableRows the rows routed to them
	// that no readable topic holds: neither found nor missing, they are
	// not verified. Every other topic is.
	UnreadableTopics []VerifyUnreadableTopic `json:"unreadable_topics,omitempty"`
	UnreadableRows   int64                   `json:"unreadable_rows"`
	// SpillFiles is the number of sorted runs written to disk (0: the
	// window fit in memory).
	SpillFiles int `json:"spill_files"`

	MissingRows     []VerifyMissingRow `json:"missing_rows"`
	DuplicateRows   []VerifyDuplicate  `json:"duplicate_rows"`
	MismatchRecords []VerifyMismatch   `json:"mismatch_records"`
	OrderBreakList  []VerifyOrderBreak `json:"order_break_list"`

	// Started and Duration time the run.
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
}

// OK is true when every row is accounted for: nothing missing, no
// mismatched record, no order break. Duplicates and pending rows do not
// count against it.
func (r *VerifyReport) OK() bool { return r.Missing == 0 && r.Mismatched == 0 && r.OrderBreaks == 0 }

// VerifyUnreadableTopic is a routed topic verify may not read, and why.
type VerifyUnreadableTopic struct {
	Topic string `json:"topic"`
	Error string `json:"error"`
}

// VerifyTopicRange is a topic read and its partitions.
type VerifyTopicRange struct {
	Topic      string                 `json:"topic"`
	Partitions []VerifyPartitionRange `json:"partitions"`
}

// VerifyPartitionRange is the offsets [Start, End) read from a partition: Start
// the first at or after the window's start minus the margin, End the last
// stable offset when the read began.
type VerifyPartitionRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// VerifyMissingRow is a row found in no topic.
type VerifyMissingRow struct {
	ID        string    `json:"id"`
	Topic     string    `json:"topic"`
	CreatedAt time.Time `json:"created_at"`
	// CommitTime is the row's commit time, known only when the server
	// runs with track_commit_timestamp = on.
	CommitTime *time.Time `json:"commit_time,omitempty"`
}

// VerifyDuplicate is a row with more than one record.
type VerifyDuplicate struct {
	ID      string         `json:"id"`
	Records int            `json:"records"`
	Offsets []VerifyOffset `json:"offsets"`
}

// VerifyOffset is where a record is.
type VerifyOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// VerifyMismatch is a record that disagrees with its row: Field is "key",
// "business-key" or "topic"; Want is the row's, Got the record's.
type VerifyMismatch struct {
	ID     string       `json:"id"`
	Offset VerifyOffset `json:"at"`
	Field  string       `json:"field"`
	Want   string       `json:"want"`
	Got    string       `json:"got"`
}

// VerifyOrderBreak is a first delivery committed before one that precedes it in
// its aggregate's partition.
type VerifyOrderBreak struct {
	AggregateID string       `json:"aggregate_id"`
	ID          string       `json:"id"`
	At          VerifyOffset `json:"at"`
	CommitTime  time.Time    `json:"commit_time"`
	AfterID     string       `json:"after_id"`
	AfterOffset int64        `json:"after_offset"`
	AfterCommit time.Time    `json:"after_commit_time"`
}
