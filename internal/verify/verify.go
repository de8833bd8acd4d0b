package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
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
	// relaytype.TableFormatPgoutbox.
	Format relaytype.TableFormat
	// Route is the relay's routing: the topic of a row with these
	// aggregate type, event type and topic column (empty when NULL or
	// absent). Required.
	Route func(aggregateType, eventType, topic []byte) string
	// DeadLetterTopic is read too: a row found there was dead-lettered
	// by the relay, not lost. Empty: not read.
	DeadLetterTopic string
	// Reader reads what the routed topics and the dead-letter topic hold:
	// the sink's read side (publish.Reader; Kafka's reads what a
	// read_committed reader sees, from the offsets whose timestamps cover
	// the window). Required.
	Reader publish.Reader

	// VerifyOptions are the window (From, To; required, From before To)
	// and the resources (relaytype.VerifyOptions, declared once in
	// relaytype, documents them; the defaults are DefaultMargin,
	// DefaultGrace, DefaultList, DefaultMaxInMemory, DefaultMaxSpillBytes,
	// DefaultMaxTopics and DefaultMaxTopicBytes).
	relaytype.VerifyOptions
	// PrunedBefore, when not nil, is the relay's prune high-water mark:
	// rows created before it may have been deleted.
	PrunedBefore *time.Time
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
	}{{&cc.Margin, relaytype.DefaultVerifyMargin}, {&cc.Grace, relaytype.DefaultVerifyGrace}} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			*d.v = 0
		}
	}
	if cc.List == 0 {
		cc.List = relaytype.DefaultVerifyList
	}
	if cc.List < 0 {
		cc.List = 0
	}
	if cc.MaxInMemory == 0 {
		cc.MaxInMemory = relaytype.DefaultVerifyMaxInMemory
	}
	if cc.MaxTopics == 0 {
		cc.MaxTopics = relaytype.DefaultVerifyMaxTopics
	}
	if cc.MaxTopicBytes == 0 {
		cc.MaxTopicBytes = relaytype.DefaultVerifyMaxTopicBytes
	}
	switch {
	case cc.MaxSpillBytes == 0:
		cc.MaxSpillBytes = relaytype.DefaultVerifyMaxSpillBytes
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
	case cc.Conn == nil || cc.Route == nil || cc.Reader == nil:
		return cc, fmt.Errorf("%w: a connection, a route and a reader are required", ErrUsage)
	case cc.From.IsZero() || cc.To.IsZero():
		return cc, fmt.Errorf("%w: the window needs a start and an end", ErrUsage)
	case !cc.To.After(cc.From):
		return cc, fmt.Errorf("%w: the window's end %s is not after its start %s", ErrUsage, cc.To.UTC().Format(time.RFC3339), cc.From.UTC().Format(time.RFC3339))
	case cc.MaxInMemory < 0:
		return cc, fmt.Errorf("%w: max-in-memory must not be negative", ErrUsage)
	}
	return cc, nil
}

// The report and its entries are relaytype's (which documents them and
// their JSON names): one declaration for verify and package relay.
type (
	// Report is what verify found.
	Report = relaytype.VerifyReport
	// UnreadableTopic is a routed topic verify may not read, and why.
	UnreadableTopic = relaytype.VerifyUnreadableTopic
	// TopicRange is a topic read and its partitions.
	TopicRange = relaytype.VerifyTopicRange
	// PartitionRange is the offsets [Start, End) read from a partition.
	PartitionRange = relaytype.VerifyPartitionRange
	// MissingRow is a row found in no topic.
	MissingRow = relaytype.VerifyMissingRow
	// Duplicate is a row with more than one record.
	Duplicate = relaytype.VerifyDuplicate
	// Offset is where a record is.
	Offset = relaytype.VerifyOffset
	// Mismatch is a record that disagrees with its row.
	Mismatch = relaytype.VerifyMismatch
	// OrderBreak is a first delivery committed before one that precedes
	// it in its aggregate's partition.
	OrderBreak = relaytype.VerifyOrderBreak
)

// Run verifies the window of cfg.
func Run(ctx context.Context, cfg *Config) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &verifier{c: &c, topics: newTopics(c.MaxTopics, c.MaxTopicBytes), rep: &Report{From: c.From, To: c.To, Started: c.Now()}}
	if c.PrunedBefore != nil && c.PrunedBefore.After(c.From) {
		p := *c.PrunedBefore
		v.rep.PrunedBefore = &p
	}
	spill, err := makeSpillDir(c.SpillDir, c.Logger)
	if err != nil {
		return nil, err
	}
	defer spill.remove()
	disk := &spillBudget{max: c.MaxSpillBytes}
	v.rows = newSorter(compareRows, codec[rowEntry](rowCodec{}), c.MaxInMemory, spill.path, disk)
	v.records = newSorter(compareRecords, codec[recordEntry](recordCodec{}), c.MaxInMemory, spill.path, disk)
	v.deliveries = newSorter(compareDeliveries, codec[deliveryEntry](deliveryCodec{}), c.MaxInMemory, spill.path, disk)
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

// ErrTopics is wrapped by the error of a window whose rows route to more
// topics than Config.MaxTopics or MaxTopicBytes allow.
var ErrTopics = relaytype.ErrVerifyTopics

// topics interns topic names, at most maxCount names of maxBytes in all
// (negative: no cap).
type topics struct {
	index    map[string]uint32
	names    []string
	bytes    int64
	maxCount int
	maxBytes int64
}

func newTopics(maxCount int, maxBytes int64) *topics {
	return &topics{index: map[string]uint32{}, maxCount: maxCount, maxBytes: maxBytes}
}

// intern returns name's index, adding it unless that passes a cap.
func (t *topics) intern(name string) (uint32, error) {
	if i, ok := t.index[name]; ok {
		return i, nil
	}
	switch {
	case t.maxCount >= 0 && len(t.names) >= t.maxCount:
		return 0, fmt.Errorf("%w: the window's rows route to more than %d distinct topics (--max-topics, VerifyOptions.MaxTopics): "+
			"verify keeps and reads every topic its rows route to; narrow the window, set --allowed-topics as the relay has it, or raise the cap", ErrTopics, t.maxCount)
	case t.maxBytes >= 0 && t.bytes+int64(len(name)) > t.maxBytes:
		return 0, fmt.Errorf("%w: the names of the distinct topics the window's rows route to pass %d bytes (--max-topic-bytes, VerifyOptions.MaxTopicBytes) at %d topics: "+
			"verify keeps and reads every topic its rows route to; narrow the window, set --allowed-topics as the relay has it, or raise the cap", ErrTopics, t.maxBytes, len(t.names))
	}
	i := uint32(len(t.names))
	t.index[name] = i
	t.names = append(t.names, name)
	t.bytes += int64(len(name))
	return i, nil
}
