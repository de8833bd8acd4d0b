package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Setup creates, idempotently, the outbox table, the publication (FOR TABLE
// the outbox WITH (publish = 'insert', publish_via_partition_root = true))
// and the slot (pgoutput). An existing table must have the columns of
// cfg.TableFormat (an error wrapping relaytype.ErrTableColumns otherwise, naming the
// format its columns fit); Setup never adds its own columns to it. With
// relaytype.TableFormatDebezium the table must exist: Setup creates only the relay
// state table next to it. On an existing publication it turns
// publish_via_partition_root on; one that does not publish exactly the
// table's inserts (see relaytype.SlotStatus.PublicationMismatch) is an error wrapping
// relaytype.ErrPublicationMismatch; one that also publishes updates, deletes or
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
// error wrapping relaytype.ErrSlotActive. A publication that another slot of the
// database streams, or that another relay slot of the outbox may use (it
// has a state row), is an error wrapping relaytype.ErrPublicationInUse naming that
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

// Backfill publishes the outbox rows opts selects, read from the table in
// one snapshot, ordered by created_at then id (UUIDv7 ids sort by creation),
// as Kafka records built exactly as the relay builds them from the WAL
// (timestamp: created_at), through the same writer. It returns the number
// published. Use it to bootstrap or repair a consumer; consumers
// deduplicate on message-id. Logical messages (EmitTx) are not in the table
// and are not backfilled.
func Backfill(ctx context.Context, cfg *Config, opts relaytype.BackfillOptions) (int, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return 0, err
	}
	return admin.Backfill(ctx, &ac, opts)
}

// Recover repairs a gap on cfg.Slot (see relaytype.GapError) without losing events:
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
// It refuses with a *relaytype.BackfillPrunedError when pruning may have deleted rows
// of the needed range. Without a gap it does nothing (relaytype.RecoverResult.Gap is
// nil).
func Recover(ctx context.Context, cfg *Config) (*relaytype.RecoverResult, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return nil, err
	}
	return admin.Recover(ctx, &ac)
}

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

// TopicTemplateOf is the default Config.TopicTemplate of table format f:
// relaytype.DefaultTopicTemplate, or relaytype.DefaultDebeziumTopicTemplate
// for relaytype.TableFormatDebezium.
func TopicTemplateOf(f relaytype.TableFormat) string { return tableformat.Shape(f).TopicTemplate }

// TableFormatList is the table formats as a user types them, the default
// first ("pgoutbox, debezium"), for usage texts and errors.
func TableFormatList() string { return tableformat.FormatList() }

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
// *relaytype.PrerequisitesError listing every problem with its fix, or nil.
func CheckPrerequisites(ctx context.Context, cfg *Config) error {
	ac, err := adminConfig(cfg)
	if err != nil {
		return err
	}
	return admin.CheckPrerequisites(ctx, &ac)
}
