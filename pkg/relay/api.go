package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Setup creates, idempotently, the outbox table, the publication (FOR TABLE
// the outbox WITH (publish = 'insert', publish_via_partition_root = true))
// and the slot (pgoutput). An existing table must have the columns of
// cfg.TableFormat (an error wrapping ErrTableColumns otherwise, naming the
// format its columns fit); Setup never adds its own columns to it. With
// TableFormatDebezium the table must exist: Setup creates only the relay
// state table next to it. On an existing publication it turns
// publish_via_partition_root on; one that does not publish exactly the
// table's inserts (see SlotStatus.PublicationMismatch) is an error wrapping
// ErrPublicationMismatch; one that also publishes updates, deletes or
// truncates is accepted with a warning, since the relay ignores them.
func Setup(ctx context.Context, cfg *Config) error {
	ac, err := adminConfig(cfg)
	if err != nil {
		return err
	}
	return admin.Setup(ctx, &ac)
}

// Teardown drops the slot and the publication (not the table) and deletes
// the slot's relay state row, giving its position up. An active slot is an
// error wrapping ErrSlotActive. A publication that another slot of the
// database streams, or that another relay slot of the outbox may use (it
// has a state row), is an error wrapping ErrPublicationInUse naming that
// slot, and nothing is dropped: use TeardownSlot. Missing objects are not
// errors.
func Teardown(ctx context.Context, cfg *Config) error {
	ac, err := adminConfig(cfg)
	if err != nil {
		return err
	}
	return admin.Teardown(ctx, &ac, false)
}

// TeardownSlot is Teardown without the publication: it drops the slot and
// deletes its relay state row only (a mistyped slot beside a running
// relay).
func TeardownSlot(ctx context.Context, cfg *Config) error {
	ac, err := adminConfig(cfg)
	if err != nil {
		return err
	}
	return admin.Teardown(ctx, &ac, true)
}

// ErrBackfillPruned means rows a recovery needs may have been deleted by
// pruning (relaytype.ErrBackfillPruned).
var ErrBackfillPruned = relaytype.ErrBackfillPruned

// BackfillPrunedError names the creation-time range of outbox rows that
// recovery would need but pruning may have deleted
// (relaytype.BackfillPrunedError).
type BackfillPrunedError = relaytype.BackfillPrunedError

// BackfillOptions selects the outbox rows Backfill publishes
// (relaytype.BackfillOptions).
type BackfillOptions = relaytype.BackfillOptions

// RecoverResult says what Recover did (relaytype.RecoverResult).
type RecoverResult = relaytype.RecoverResult

// Backfill publishes the outbox rows opts selects, read from the table in
// one snapshot, ordered by created_at then id (UUIDv7 ids sort by creation),
// as Kafka records built exactly as the relay builds them from the WAL
// (timestamp: created_at), through the same writer. It returns the number
// published. Use it to bootstrap or repair a consumer; consumers
// deduplicate on message-id. Logical messages (EmitTx) are not in the table
// and are not backfilled.
func Backfill(ctx context.Context, cfg *Config, opts BackfillOptions) (int, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return 0, err
	}
	return admin.Backfill(ctx, &ac, opts)
}

// Recover repairs a gap on cfg.Slot (see GapError) without losing events:
// it drops the slot if it still exists (it must not be active), creates it
// anew exporting its snapshot, and inside that snapshot publishes every
// outbox row created at or after the last confirmed commit time minus
// BackfillMargin, in created_at, id order; then it records the new slot in
// the relay state, so that Run streams from it. Events committed before
// the snapshot come from the table, later ones from the slot: none is
// missing; rows published twice are bounded by the margin. A crash midway
// leaves the gap in place (the state is written last), so Recover can run
// again.
//
// It refuses with a *BackfillPrunedError when pruning may have deleted rows
// of the needed range. Without a gap it does nothing (RecoverResult.Gap is
// nil).
func Recover(ctx context.Context, cfg *Config) (*RecoverResult, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return nil, err
	}
	return admin.Recover(ctx, &ac)
}

// Bounds of a dead-letter record (docs/kafka.md lists them). A row's values
// are untrusted: whatever they hold, its dead-letter record fits, so no row
// can stop the relay.
const (
	// MaxDeadLetterHeaderBytes bounds the value of every header a
	// dead-letter record carries over from its event (business-key,
	// aggregate-id, the row's own headers...): a longer value is cut to it
	// and named in dlq-truncated. original-topic is cut to Kafka's longest
	// topic name (249 bytes), dlq-detail to 1,024 bytes.
	MaxDeadLetterHeaderBytes = decode.MaxDeadLetterHeaderBytes
	// MaxDeadLetterHeaderNameBytes bounds the name of a header a
	// dead-letter record carries over: a header with a longer name is left
	// out ("headers" in dlq-truncated).
	MaxDeadLetterHeaderNameBytes = decode.MaxDeadLetterHeaderNameBytes
)

// Reasons of invalid events: the dlq-reason header and the reason label of
// pgoutbox_relay_invalid_events_total.
const (
	ReasonNullColumn       = decode.ReasonNullColumn       // NULL in a required column
	ReasonBadValue         = decode.ReasonBadValue         // a value that does not parse (message ID, bytea)
	ReasonTooLarge         = decode.ReasonTooLarge         // record over MaxMessageBytes or the broker's limit
	ReasonUnsupportedType  = decode.ReasonUnsupportedType  // a column value in a form the relay cannot read
	ReasonBadHeaders       = decode.ReasonBadHeaders       // headers not a JSON object, or naming a header the relay writes
	ReasonBadTopic         = decode.ReasonBadTopic         // not a legal Kafka topic name, the dead-letter topic, or not allowed
	ReasonBadMessage       = decode.ReasonBadMessage       // a pgoutbox logical message that does not parse
	ReasonKafkaRejected    = decode.ReasonKafkaRejected    // a record the brokers refuse for good (policy, invalid record...)
	ReasonBadColumns       = decode.ReasonBadColumns       // a row of a table layout (relation message) the relay cannot read
	ReasonNotOutbox        = decode.ReasonNotOutbox        // a row of a table the publication publishes that is not the outbox
	ReasonInvalidKey       = decode.ReasonInvalidKey       // a business key that breaks the key rules (internal/contract)
	ReasonTopicUnavailable = decode.ReasonTopicUnavailable // a topic missing or not writable past TopicUnavailableGrace
)

// Sentinel errors (relaytype.ErrConfig... document each). Run, Setup,
// Status and Teardown wrap them with the details; use errors.Is.
var (
	ErrConfig              = relaytype.ErrConfig
	ErrVerifyTopics        = relaytype.ErrVerifyTopics
	ErrSlotMissing         = relaytype.ErrSlotMissing
	ErrPublicationMissing  = relaytype.ErrPublicationMissing
	ErrPublicationMismatch = relaytype.ErrPublicationMismatch
	ErrSlotMismatch        = relaytype.ErrSlotMismatch
	ErrSlotActive          = relaytype.ErrSlotActive
	ErrPublicationInUse    = relaytype.ErrPublicationInUse
	ErrSlotInvalidated     = relaytype.ErrSlotInvalidated
	ErrGap                 = relaytype.ErrGap
	ErrStateMissing        = relaytype.ErrStateMissing
	ErrTableMissing        = relaytype.ErrTableMissing
	ErrTableColumns        = relaytype.ErrTableColumns
	ErrInvalidEvent        = relaytype.ErrInvalidEvent
	ErrDeadLetter          = relaytype.ErrDeadLetter
	ErrKafkaAuth           = relaytype.ErrKafkaAuth
	ErrFenced              = relaytype.ErrFenced
	ErrTopicUnavailable    = relaytype.ErrTopicUnavailable
)

// InvalidEventError names an event the relay could not publish, returned by
// Run when Config.OnInvalid is InvalidStop (relaytype.InvalidEventError).
type InvalidEventError = relaytype.InvalidEventError

// IsPermanent reports whether err is one that retrying cannot fix: bad
// configuration, refused credentials or privileges, a missing or
// invalidated slot, unusable table columns, an invalid event under
// InvalidStop.
func IsPermanent(err error) bool {
	return relayerr.IsPermanent(err)
}

// ProgressKey is the progress record key, and the transactional ID, of
// the incarnation of a slot (its state row's, shown by Status) on the
// server of system identifier systemID: the same for every relay of the
// slot, across restarts, until the slot is created anew or a clone of the
// database is found to share it.
func ProgressKey(systemID, slot, incarnation string) string {
	return sink.ProgressKey(systemID, slot, incarnation)
}

// TableFormat names the column layout of the outbox table: which column
// holds each field of an event. The decoder is the same for every format;
// only this mapping differs.
type TableFormat = tableformat.TableFormat

const (
	// TableFormatPgoutbox is pgoutbox's own table (sql/outbox): id,
	// aggregate_type, aggregate_id, event_type, business_key, payload,
	// headers, topic, created_at. The default.
	TableFormatPgoutbox = tableformat.TableFormatPgoutbox
	// TableFormatDebezium is the table of Debezium's Outbox Event Router in
	// its default configuration: id, aggregatetype, aggregateid, type,
	// payload (nullable), and optionally timestamp and tracingspancontext.
	// It has no business key: the message ID serves as one. Records carry
	// the headers the router writes ("id", and "type" as
	// table.fields.additional.placement=type:header does) besides the
	// contract headers, and go by default to "outbox.event.{aggregate_type}".
	TableFormatDebezium = tableformat.TableFormatDebezium
)

// TableFormats lists the formats, the default first.
var TableFormats = tableformat.TableFormats

// TopicTemplateOf is the default Config.TopicTemplate of table format f:
// DefaultTopicTemplate, or DefaultDebeziumTopicTemplate for
// TableFormatDebezium.
func TopicTemplateOf(f TableFormat) string { return tableformat.Shape(f).TopicTemplate }

// TableFormatList is the table formats as a user types them, the default
// first ("pgoutbox, debezium"), for usage texts and errors.
func TableFormatList() string { return tableformat.FormatList() }

// Default topic templates of the table formats.
const (
	DefaultTopicTemplate         = tableformat.DefaultTopicTemplate
	DefaultDebeziumTopicTemplate = tableformat.DefaultDebeziumTopicTemplate
)

// Reasons of a GapError, and values of the reason label of
// pgoutbox_relay_gap (relaytype.GapSlotMissing... say what each means).
const (
	GapSlotMissing          = relaytype.GapSlotMissing
	GapSlotLost             = relaytype.GapSlotLost
	GapSlotRecreated        = relaytype.GapSlotRecreated
	GapSystemChanged        = relaytype.GapSystemChanged
	GapTimelineChanged      = relaytype.GapTimelineChanged
	GapPublicationRecreated = relaytype.GapPublicationRecreated
)

// GapError says that events may have been skipped: the slot cannot be
// trusted to resume where the relay left off. Run returns it (wrapping
// ErrGap) before streaming anything; Recover repairs it
// (relaytype.GapError).
type GapError = relaytype.GapError

// OtherTopicLabel is the topic label of pgoutbox_relay_events_published_total
// that counts the records of every topic past the first 1,000 the relay
// published to. It cannot be a topic's name: Kafka refuses parentheses.
const OtherTopicLabel = relaymetrics.OtherTopicLabel

// ErrPrerequisites is wrapped by a *PrerequisitesError
// (relaytype.ErrPrerequisites).
var ErrPrerequisites = relaytype.ErrPrerequisites

// Problem is one unmet prerequisite and the statement or setting that fixes
// it (relaytype.Problem).
type Problem = relaytype.Problem

// PrerequisitesError lists every unmet prerequisite at once
// (relaytype.PrerequisitesError).
type PrerequisitesError = relaytype.PrerequisitesError

// CheckPrerequisites checks, without changing anything, that the server
// and the role of cfg.DatabaseURL can do what `relay setup` (and `relay
// run`, which creates a missing publication or slot unless cfg.NoCreate)
// needs: a primary, not a standby; wal_level=logical; a free replication slot when the slot must be
// created; a free WAL sender; the REPLICATION attribute (or rds_replication
// on RDS); CREATE on the table's schema when the table or the migration
// bookkeeping must be created, and on the database for a new publication;
// ownership of the table for a new publication; SELECT, INSERT and UPDATE
// on the relay state table; SELECT on the table with OnGap backfill and
// DELETE with PruneAfter. It returns a
// *PrerequisitesError listing every problem with its fix, or nil.
func CheckPrerequisites(ctx context.Context, cfg *Config) error {
	ac, err := adminConfig(cfg)
	if err != nil {
		return err
	}
	return admin.CheckPrerequisites(ctx, &ac)
}

// StateTableName is the name of the relay's state table, created by
// outbox.Migrate (migration 002) in the outbox table's schema: one row per
// slot holding what a new primary needs to know to tell a gap from a
// replay (see docs/failover.md).
const StateTableName = slotstate.StateTableName
