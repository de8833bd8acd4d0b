package relay

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
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
	return admin.Setup(ctx, cfg.engine())
}

// Teardown drops the slot and the publication (not the table) and deletes
// the slot's relay state row, giving its position up. An active slot is an
// error wrapping ErrSlotActive. A publication that another slot of the
// database streams, or that another relay slot of the outbox may use (it
// has a state row), is an error wrapping ErrPublicationInUse naming that
// slot, and nothing is dropped: use TeardownSlot. Missing objects are not
// errors.
func Teardown(ctx context.Context, cfg *Config) error {
	return admin.Teardown(ctx, cfg.engine(), false)
}

// TeardownSlot is Teardown without the publication: it drops the slot and
// deletes its relay state row only (a mistyped slot beside a running
// relay).
func TeardownSlot(ctx context.Context, cfg *Config) error {
	return admin.Teardown(ctx, cfg.engine(), true)
}

// ErrBackfillPruned means rows a recovery needs may have been deleted by
// pruning: the BackfillPrunedError names the time range.
var ErrBackfillPruned = admin.ErrBackfillPruned

// BackfillPrunedError names the creation-time range of outbox rows that
// recovery would have to publish but that pruning may already have
// deleted. Recover refuses rather than publish part of it. Its fields:
// Slot; From and To, the range (rows created at or after From and before
// To may be gone). It is the engine's own type, so that errors.As finds
// the value Recover returns, wrapped or not.
type BackfillPrunedError = admin.BackfillPrunedError

// BackfillOptions selects the outbox rows Backfill publishes.
type BackfillOptions struct {
	// Since selects rows created at or after it. Required.
	Since time.Time
	// Until, when not zero, selects rows created before it.
	Until time.Time
	// AggregateType, when not empty, selects rows of that aggregate type.
	AggregateType string
	// Progress, when not nil, is called after every acknowledged batch with
	// the rows published so far and the creation time of the last one.
	Progress func(published int, createdAt time.Time)
}

// RecoverResult says what Recover did.
type RecoverResult struct {
	// Gap is the gap that was repaired; nil when there was none (Recover
	// then did nothing).
	Gap *GapError
	// Since is the creation time from which rows were published: the
	// last confirmed commit time minus BackfillMargin.
	Since time.Time
	// Published is the number of rows published (dead-lettered rows
	// included).
	Published int
	// InKafka is the number of rows of the range not published because
	// Kafka already held a record of their message ID (in their topic or
	// the dead-letter topic, read read_committed).
	InKafka int
	// SlotLSN is the new slot's consistent point: streaming resumes there.
	SlotLSN pglogrepl.LSN
}

// Backfill publishes the outbox rows opts selects, read from the table in
// one snapshot, ordered by created_at then id (UUIDv7 ids sort by creation),
// as Kafka records built exactly as the relay builds them from the WAL
// (timestamp: created_at), through the same writer. It returns the number
// published. Use it to bootstrap or repair a consumer; consumers
// deduplicate on message-id. Logical messages (EmitTx) are not in the table
// and are not backfilled.
func Backfill(ctx context.Context, cfg *Config, opts BackfillOptions) (int, error) {
	return admin.Backfill(ctx, cfg.engine(), admin.BackfillOptions(opts))
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
	res, err := admin.Recover(ctx, cfg.engine())
	return (*RecoverResult)(res), err
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
	MaxDeadLetterHeaderBytes = sink.MaxDeadLetterHeaderBytes
	// MaxDeadLetterHeaderNameBytes bounds the name of a header a
	// dead-letter record carries over: a header with a longer name is left
	// out ("headers" in dlq-truncated).
	MaxDeadLetterHeaderNameBytes = sink.MaxDeadLetterHeaderNameBytes
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

// Sentinel errors. Run, Setup, Status and Teardown wrap them with the
// details; use errors.Is.
var (
	// ErrConfig means the Config is invalid.
	ErrConfig = relayerr.ErrConfig
	// ErrSlotMissing means the slot does not exist and NoCreate is set.
	ErrSlotMissing = relayerr.ErrSlotMissing
	// ErrPublicationMissing means the publication does not exist and
	// NoCreate is set.
	ErrPublicationMissing = relayerr.ErrPublicationMissing
	// ErrPublicationMismatch means the publication exists but does not
	// publish exactly the outbox table's inserts: the table or inserts
	// missing, a row filter or column list, other tables, or partitions
	// published under their own names.
	ErrPublicationMismatch = relayerr.ErrPublicationMismatch
	// ErrSlotMismatch means a slot of that name exists with another output
	// plugin or in another database.
	ErrSlotMismatch = relayerr.ErrSlotMismatch
	// ErrSlotActive means another process streams the slot.
	ErrSlotActive = relayerr.ErrSlotActive
	// ErrPublicationInUse means Teardown refused to drop the publication
	// because another slot streams it or relays the same outbox (the
	// error names it); TeardownSlot drops the slot alone.
	ErrPublicationInUse = relayerr.ErrPublicationInUse
	// ErrSlotInvalidated means the server removed WAL the slot still
	// needed (wal_status lost): events may be lost, the slot must be
	// recreated by an operator.
	ErrSlotInvalidated = relayerr.ErrSlotInvalidated
	// ErrGap is wrapped by the GapError that stops Run when the slot
	// cannot be trusted to resume where the relay left off: events may
	// have been skipped (see docs/failover.md).
	ErrGap = relayerr.ErrGap
	// ErrStateMissing means the relay's state table does not exist (see
	// StateTableName) and NoCreate is set.
	ErrStateMissing = relayerr.ErrStateMissing
	// ErrTableMissing means the outbox table does not exist.
	ErrTableMissing = relayerr.ErrTableMissing
	// ErrTableColumns means the outbox table lacks a column the relay
	// needs or has one of an unsupported type.
	ErrTableColumns = relayerr.ErrTableColumns
	// ErrInvalidEvent is wrapped by the InvalidEventError that stops Run
	// when Config.OnInvalid is InvalidStop.
	ErrInvalidEvent = relayerr.ErrInvalidEvent
	// ErrDeadLetter means Kafka refused a record of the dead-letter topic
	// for good (the topic does not exist, is not writable, or rejects
	// the record), so an invalid event could not be dead-lettered.
	ErrDeadLetter = relayerr.ErrDeadLetter
	// ErrKafkaAuth means the brokers refused the relay's credentials or
	// permissions.
	ErrKafkaAuth = relayerr.ErrKafkaAuth
	// ErrFenced means, in exactly-once mode, that the brokers refused the
	// relay's transactional producer for its epoch: a newer relay of the
	// slot initialised the slot's transactional ID, or the brokers aborted
	// the relay's open transaction (it outlasted the transaction
	// timeout). Nothing of that transaction is confirmed; the session ends
	// and the next one initialises the producer again, or waits as a
	// standby when another relay holds the slot. It is not permanent.
	ErrFenced = relayerr.ErrFenced
	// ErrTopicUnavailable means writes to a topic failed because it does
	// not exist or the relay may not write it, for longer than
	// Config.TopicUnavailableGrace.
	ErrTopicUnavailable = relayerr.ErrTopicUnavailable
)

// InvalidEventError names an event the relay could not publish, returned by
// Run when Config.OnInvalid is InvalidStop. Its fields: MessageID, the
// event's message ID (uuid.Nil when it has none); Reason, one of the
// Reason* constants; Detail, what exactly is wrong. It is the engine's own
// type, so that errors.As finds the value Run returns.
type InvalidEventError = relayerr.InvalidEventError

// IsPermanent reports whether err is one that retrying cannot fix: bad
// configuration, refused credentials or privileges, a missing or
// invalidated slot, unusable table columns, an invalid event under
// InvalidStop.
func IsPermanent(err error) bool {
	return relayerr.IsPermanent(err)
}

// ProgressKey is the progress record key, and the transactional ID, of a
// slot on the server of system identifier systemID: the same for every
// relay of the slot, across restarts.
func ProgressKey(systemID string, slot string) string {
	return sink.ProgressKey(systemID, slot)
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

// Default topic templates of the table formats.
const (
	DefaultTopicTemplate         = tableformat.DefaultTopicTemplate
	DefaultDebeziumTopicTemplate = tableformat.DefaultDebeziumTopicTemplate
)

// Reasons of a GapError (and values of the reason label of
// pgoutbox_relay_gap).
const (
	// GapSlotMissing: the state says the slot existed, the server has no
	// such slot (a failover to a physical standby before PG 17, a
	// pg_upgrade that did not carry it, a DBA dropping it).
	GapSlotMissing = slotstate.GapSlotMissing
	// GapSlotLost: the server removed WAL the slot still needed
	// (wal_status lost, max_slot_wal_keep_size exceeded).
	GapSlotLost = slotstate.GapSlotLost
	// GapSlotRecreated: the slot's confirmed position is past anything
	// this relay could have confirmed: it was re-created, or moved by
	// something else (pg_replication_slot_advance, another consumer).
	GapSlotRecreated = slotstate.GapSlotRecreated
	// GapSystemChanged: the server is another cluster than the one the
	// slot was created on (a restore, a pg_upgrade, another server).
	GapSystemChanged = slotstate.GapSystemChanged
	// GapTimelineChanged: the server's timeline changed since the slot
	// was created (a promotion, a point-in-time restore).
	GapTimelineChanged = slotstate.GapTimelineChanged
)

// GapError says that events may have been skipped: the slot cannot be
// trusted to resume where the relay left off. Run returns it (wrapping
// ErrGap) before streaming anything; Recover repairs it. Its fields:
// Slot; Reason, one of the Gap* constants; Detail, what happened in
// words; Since, the commit time of the last transaction the relay
// recorded as published (or the slot's creation time), after which events
// may be missing from Kafka; ConfirmedLSN, the last position the relay
// recorded as published; MessagesSeen, true when the relay published
// logical messages (outbox.Writer.EmitTx) on the slot, which exist only in
// the WAL and which no backfill from the table recovers. It is the
// engine's own type, so that errors.As finds the value Run returns.
type GapError = slotstate.GapError

// OtherTopicLabel is the topic label of pgoutbox_relay_events_published_total
// that counts the records of every topic past the first 1,000 the relay
// published to. It cannot be a topic's name: Kafka refuses parentheses.
const OtherTopicLabel = relaymetrics.OtherTopicLabel

// ErrPrerequisites is wrapped by a *PrerequisitesError: the server or the
// role lacks something the relay needs (wal_level, free slots or WAL
// senders, REPLICATION, CREATE rights, table ownership).
var ErrPrerequisites = admin.ErrPrerequisites

// Problem is one unmet prerequisite and the statement or setting that fixes
// it.
type Problem = struct {
	// Check names what was checked: "wal_level", "replication slots",
	// "wal senders", "replication role", "create", "table owner".
	Check string
	// Detail says what was found.
	Detail string
	// Fix is the statement or setting that fixes it, for the platform the
	// server looks like (self-managed, Amazon RDS/Aurora, Cloud SQL, Azure).
	Fix string
}

// PrerequisitesError lists every unmet prerequisite at once, in its field
// Problems ([]Problem). It is the engine's own type, so that errors.As
// finds the value Setup and CheckPrerequisites return.
type PrerequisitesError = admin.PrerequisitesError

// CheckPrerequisites checks, without changing anything, that the server
// and the role of cfg.DatabaseURL can do what `relay setup` (and `relay
// run`, which creates a missing publication or slot unless cfg.NoCreate)
// needs: wal_level=logical; a free replication slot when the slot must be
// created; a free WAL sender; the REPLICATION attribute (or rds_replication
// on RDS); CREATE on the table's schema when the table or the migration
// bookkeeping must be created, and on the database for a new publication;
// ownership of the table for a new publication; SELECT, INSERT and UPDATE
// on the relay state table; SELECT on the table with OnGap backfill and
// DELETE with PruneAfter. It returns a
// *PrerequisitesError listing every problem with its fix, or nil.
func CheckPrerequisites(ctx context.Context, cfg *Config) error {
	return admin.CheckPrerequisites(ctx, cfg.engine())
}

// StateTableName is the name of the relay's state table, created by
// outbox.Migrate (migration 002) in the outbox table's schema: one row per
// slot holding what a new primary needs to know to tell a gap from a
// replay (see docs/failover.md).
const StateTableName = slotstate.StateTableName
