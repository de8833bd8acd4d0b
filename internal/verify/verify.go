package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// Defaults of the Config fields.
const (
	DefaultMargin = time.Minute
	// DefaultMaxSpillBytes is the default Config.MaxSpillBytes.
	DefaultMaxSpillBytes = 10 << 30
	DefaultGrace         = time.Minute
	DefaultList          = 20
	DefaultMaxInMemory   = 200_000
)

// ErrUsage marks a Config or window that cannot be verified as given.
var ErrUsage = errors.New("verify: bad usage")

// Config says what to verify and how.
type Config struct {
	// Conn reads the outbox table. Required.
	Conn *pgx.Conn
	// Table is the outbox table. Required.
	Table pgname.Table
	// Format is the table's column layout. Defaults to
	// tableformat.TableFormatPgoutbox.
	Format tableformat.TableFormat
	// Route is the relay's routing: the topic of a row with these
	// aggregate type, event type and topic column (empty when NULL or
	// absent). Required.
	Route func(aggregateType, eventType, topic []byte) string
	// DeadLetterTopic is read too: a row found there was dead-lettered
	// by the relay, not lost. Empty: not read.
	DeadLetterTopic string
	// Kafka are the client options that reach the brokers (seed brokers,
	// TLS, SASL). Required.
	Kafka []kgo.Opt

	// From and To bound the window: rows created at or after From and
	// before To. Required; From before To.
	From, To time.Time
	// PrunedBefore, when not nil, is the relay's prune high-water mark:
	// rows created before it may have been deleted.
	PrunedBefore *time.Time
	// Margin is how far before From the topics are read (by record
	// timestamp). Defaults to DefaultMargin; negative means none.
	Margin time.Duration
	// Grace: a row created less than this before the run started and not
	// found in Kafka is pending, not missing (the relay may not have
	// published it yet). Defaults to DefaultGrace; negative means none.
	Grace time.Duration
	// FullKeys lists keys, business keys and aggregate IDs whole in the
	// report; by default they are shortened (redact.Key: a prefix, the
	// length and a hash), as they are often personal data.
	FullKeys bool
	// List is how many missing rows, duplicates, mismatches and order
	// breaks the report names (each). Defaults to DefaultList; negative
	// means none.
	List int
	// MaxInMemory bounds the rows, records and deliveries held in memory
	// by each of the three sorts; above it they spill to files in
	// SpillDir. Defaults to DefaultMaxInMemory.
	MaxInMemory int
	// MaxSpillBytes caps what a run writes to its spill files (runs merged
	// into one count again): past it the run fails with ErrSpillFull.
	// Defaults to DefaultMaxSpillBytes; negative means no cap.
	MaxSpillBytes int64
	// SpillDir holds the spill files, in a private directory of the run
	// that is removed when it ends (and, should the run be killed, by the
	// next run). Defaults to os.TempDir().
	SpillDir string
	// Logger receives progress. Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c *Config) withDefaults() (Config, error) {
	cc := *c
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cc.Margin, DefaultMargin}, {&cc.Grace, DefaultGrace}} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			*d.v = 0
		}
	}
	if cc.List == 0 {
		cc.List = DefaultList
	}
	if cc.List < 0 {
		cc.List = 0
	}
	if cc.MaxInMemory == 0 {
		cc.MaxInMemory = DefaultMaxInMemory
	}
	switch {
	case cc.MaxSpillBytes == 0:
		cc.MaxSpillBytes = DefaultMaxSpillBytes
	case cc.MaxSpillBytes < 0:
		cc.MaxSpillBytes = 0
	}
	if cc.Logger == nil {
		cc.Logger = slog.Default()
	}
	if cc.Now == nil {
		cc.Now = time.Now
	}
	switch {
	case cc.Conn == nil || cc.Route == nil || len(cc.Kafka) == 0:
		return cc, fmt.Errorf("%w: a connection, a route and Kafka options are required", ErrUsage)
	case cc.From.IsZero() || cc.To.IsZero():
		return cc, fmt.Errorf("%w: the window needs a start and an end", ErrUsage)
	case !cc.To.After(cc.From):
		return cc, fmt.Errorf("%w: the window's end %s is not after its start %s", ErrUsage, cc.To.UTC().Format(time.RFC3339), cc.From.UTC().Format(time.RFC3339))
	case cc.MaxInMemory < 0:
		return cc, fmt.Errorf("%w: max-in-memory must not be negative", ErrUsage)
	}
	return cc, nil
}

// Report is what verify found: relay.VerifyReport, which documents the
// fields. Package relay declares it again, field for field, and converts
// one to the other; the types it holds are aliases of struct types
// declared in both, so that the conversion compiles. Change both together.
type Report struct {
	From         time.Time  `json:"from"`
	To           time.Time  `json:"to"`
	PrunedBefore *time.Time `json:"pruned_before,omitempty"`

	Rows           int64 `json:"rows"`
	Found          int64 `json:"found"`
	DeadLettered   int64 `json:"dead_lettered"`
	Missing        int64 `json:"missing"`
	Pending        int64 `json:"pending"`
	InvalidIDs     int64 `json:"invalid_ids"`
	Duplicates     int64 `json:"duplicates"`
	DuplicatedRows int64 `json:"duplicated_rows"`
	Mismatched     int64 `json:"mismatched"`
	OrderBreaks    int64 `json:"order_breaks"`

	RecordsRead      int64 `json:"records_read"`
	RecordsWithoutID int64 `json:"records_without_id"`
	Unmatched        int64 `json:"unmatched"`
	Unverifiable     int64 `json:"unverifiable"`

	Topics           []TopicRange      `json:"topics"`
	MissingTopics    []string          `json:"missing_topics,omitempty"`
	UnreadableTopics []UnreadableTopic `json:"unreadable_topics,omitempty"`
	UnreadableRows   int64             `json:"unreadable_rows"`
	SpillFiles       int               `json:"spill_files"`

	MissingRows     []MissingRow `json:"missing_rows"`
	DuplicateRows   []Duplicate  `json:"duplicate_rows"`
	MismatchRecords []Mismatch   `json:"mismatch_records"`
	OrderBreakList  []OrderBreak `json:"order_break_list"`

	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
}

// OK is true when every row is accounted for: nothing missing, no
// mismatched record, no order break. Duplicates and pending rows do not
// count against it.
func (r *Report) OK() bool { return r.Missing == 0 && r.Mismatched == 0 && r.OrderBreaks == 0 }

// UnreadableTopic is a routed topic verify may not read, and why.
type UnreadableTopic = struct {
	Topic string `json:"topic"`
	Error string `json:"error"`
}

// TopicRange is a topic read and its partitions.
type TopicRange = struct {
	Topic      string           `json:"topic"`
	Partitions []PartitionRange `json:"partitions"`
}

// PartitionRange is the offsets [Start, End) read from a partition: Start
// the first at or after the window's start minus the margin, End the last
// stable offset when the read began.
type PartitionRange = struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// MissingRow is a row found in no topic.
type MissingRow = struct {
	ID        string    `json:"id"`
	Topic     string    `json:"topic"`
	CreatedAt time.Time `json:"created_at"`
	// CommitTime is the row's commit time, known only when the server
	// runs with track_commit_timestamp = on.
	CommitTime *time.Time `json:"commit_time,omitempty"`
}

// Duplicate is a row with more than one record.
type Duplicate = struct {
	ID      string   `json:"id"`
	Records int      `json:"records"`
	Offsets []Offset `json:"offsets"`
}

// Offset is where a record is.
type Offset = struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Mismatch is a record that disagrees with its row: Field is "key",
// "business-key" or "topic"; Want is the row's, Got the record's.
type Mismatch = struct {
	ID     string `json:"id"`
	Offset Offset `json:"at"`
	Field  string `json:"field"`
	Want   string `json:"want"`
	Got    string `json:"got"`
}

// OrderBreak is a first delivery committed before one that precedes it in
// its aggregate's partition.
type OrderBreak = struct {
	AggregateID string    `json:"aggregate_id"`
	ID          string    `json:"id"`
	At          Offset    `json:"at"`
	CommitTime  time.Time `json:"commit_time"`
	AfterID     string    `json:"after_id"`
	AfterOffset int64     `json:"after_offset"`
	AfterCommit time.Time `json:"after_commit_time"`
}

// Run verifies the window of cfg.
func Run(ctx context.Context, cfg *Config) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &verifier{c: &c, topics: newTopics(), rep: &Report{From: c.From, To: c.To, Started: c.Now()}}
	if c.PrunedBefore != nil && c.PrunedBefore.After(c.From) {
		p := *c.PrunedBefore
		v.rep.PrunedBefore = &p
	}
	spill, err := makeSpillDir(c.SpillDir, c.Logger)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(spill)
	disk := &spillBudget{max: c.MaxSpillBytes}
	v.rows = newSorter(compareRows, codec[rowEntry](rowCodec{}), c.MaxInMemory, spill, disk)
	v.records = newSorter(compareRecords, codec[recordEntry](recordCodec{}), c.MaxInMemory, spill, disk)
	v.deliveries = newSorter(compareDeliveries, codec[deliveryEntry](deliveryCodec{}), c.MaxInMemory, spill, disk)
	defer v.rows.close()
	defer v.records.close()
	defer v.deliveries.close()
	if err := v.readRows(ctx); err != nil {
		return nil, err
	}
	// The records of no row are counted and dropped as they are read, not
	// stored: the row IDs are known first.
	if v.ids, err = newRowIDs(v.rows, v.rep.Rows-v.rep.InvalidIDs); err != nil {
		return nil, err
	}
	c.Logger.Debug("verify: read the window's rows", "rows", v.rep.Rows, "topics", len(v.topics.names), "id_filter_bytes", v.ids.bytes())
	if err := v.readRecords(ctx); err != nil {
		return nil, err
	}
	c.Logger.Debug("verify: read the topics", "records", v.rep.RecordsRead)
	if err := v.match(); err != nil {
		return nil, err
	}
	if err := v.checkOrder(); err != nil {
		return nil, err
	}
	v.rep.SpillFiles = v.rows.spilled + v.records.spilled + v.deliveries.spilled
	v.rep.Duration = c.Now().Sub(v.rep.Started)
	return v.rep, nil
}

// verifier holds one run.
type verifier struct {
	c          *Config
	topics     *topics
	rep        *Report
	rows       *sorter[rowEntry]
	records    *sorter[recordEntry]
	deliveries *sorter[deliveryEntry]
	// dlq is the dead-letter topic's index; -1 when not read.
	dlq int64
	// unreadable holds the indexes of the topics verify may not read.
	unreadable map[uint32]bool
	// ids filters the records to store: those whose message ID may be a
	// row's of the window.
	ids *rowIDs
}

// topics interns topic names.
type topics struct {
	index map[string]uint32
	names []string
}

func newTopics() *topics { return &topics{index: map[string]uint32{}} }

func (t *topics) intern(name string) uint32 {
	if i, ok := t.index[name]; ok {
		return i
	}
	i := uint32(len(t.names))
	t.index[name] = i
	t.names = append(t.names, name)
	return i
}
