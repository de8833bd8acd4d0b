// Package slotstate holds what tells the relay whether its slot can be
// trusted: the slot and the publication (checked and created), the catalog
// fence that keeps confirmation behind the last passed publication check,
// and the relay's state row with the gap detection it allows. Pruning's
// SQL is here too (Prune), since its cutoff is read from and recorded in
// the state row.
//
// # Partitioned tables and renames
//
// The relay recognises the outbox by OID, not by the name in the
// replication stream. At start it resolves the table from the catalog; at
// every relation message it asks the catalog again, and the relation is
// the outbox when it is the table the session started with (a rename is
// followed and logged; the next start under the old name fails with
// ErrTableMissing), the table the configured name resolves to now (an
// outbox replaced by a new table is followed and logged), a partition of
// either, or the relation that carried the configured name when the WAL
// was written (a replay from before a rename or replacement). Any other
// relation is a table of the publication that is not the outbox: its rows
// are invalid events with reason not-outbox (dead-lettered, or they stop
// the relay under InvalidStop), never skipped.
//
// Setup creates the publication with publish_via_partition_root = true
// (PG 13+), so rows of a partitioned outbox come under the table's own
// identity whatever partition holds them, and turns the option on for an
// existing publication. Run refuses to start (ErrPublicationMismatch, with
// the statement that fixes it) on a partitioned outbox whose publication
// lacks it, and on a publication that does not publish exactly the
// outbox's inserts: the table or inserts missing, other tables or FOR ALL
// TABLES, a row filter or a column list on the outbox. Status reports the
// same in PublicationMismatch.
//
// A catalog change can also take outbox rows out of the stream without
// anything in the stream to show it: an outbox replaced by a partitioned
// table that the publication does not include never has its rows decoded,
// even after the publication is fixed. So while streaming, every 250ms, the
// relay reads pg_current_wal_lsn() and then checks that every insert of
// the outbox is published; it never confirms past the position read
// before the last check that passed, and a failing check stops it
// (ErrPublicationMismatch, or ErrPublicationMissing for a dropped
// publication). Rows written after the change are never confirmed; they
// must be published again from the table once the publication is fixed.
// Confirmation therefore trails Kafka's acknowledgement by up to one
// check. See docs/partitioning.md for time-partitioned outbox tables with
// retention by dropping partitions, and for migrating a live outbox to a
// partitioned table.
//
// # Gaps
//
// The slot's confirmed position is only worth resuming from if it is the
// slot this relay confirmed. A failover to a physical standby (logical
// slots do not exist there before PG 17), a dropped, re-created or
// invalidated slot, a restore or a pg_upgrade each leave a slot that would
// skip every event committed since the last confirmation. Re-creating a
// missing slot on reconnect is the classic silent-loss bug of CDC tools;
// the relay never does it.
//
// It keeps one row per slot in the state table (StateTableName, in the
// outbox's schema, created by Setup or outbox.Migrate): the server's system
// identifier and timeline at slot creation, the slot's creation point, the
// last confirmed LSN and commit time, a ceiling, prune's high-water mark,
// and the slot's incarnation (a random identity made with the slot, part
// of the exactly-once progress key and transactional ID; see
// Reincarnate). Being in the database, the row reaches physical standbys by
// replication. At every start and reconnect, standbys included, the relay
// compares the slot and the server with the row. Each of these is a gap: a
// slot missing while the row exists, an invalidated slot (wal_status lost),
// a slot whose confirmed_flush_lsn is past the ceiling (re-created or moved
// by someone else), another system identifier or timeline. Run then streams nothing and returns a
// *relaytype.GapError (wrapping ErrGap, permanent) whose message names the slot,
// what happened and since when; pgoutbox_relay_gap is set, and Status
// reports it. Only Setup, or a first Run with no state row for the slot,
// creates a slot.
//
// The ceiling is what keeps gaps and replays apart. The relay never
// confirms past it, and raises it (to pg_current_wal_lsn(), checking that
// the slot is still its own) before it needs to, while Kafka writes are in
// flight. A slot ahead of the ceiling was therefore created or moved by
// someone else. A slot behind the recorded position is a replay, never a
// gap: PG 15 moves the confirmed position back to its last checkpoint
// after a server restart, and the row trails the slot because it is
// written rate-limited.
//
// Recover repairs a gap without loss: it creates the slot anew exporting
// its snapshot, publishes from the table, inside that snapshot, every row
// created at or after the last confirmed commit time minus BackfillMargin
// (in created_at, id order, built and written exactly like streamed rows),
// then records the new slot; Run streams on from it. With OnGap set to
// GapBackfill, Run does that itself. Rows of the margin are published
// twice; none is missing. Recover refuses with a *BackfillPrunedError when
// pruning may have deleted rows of the needed range. Logical messages
// (outbox.Writer.EmitTx) are not in the table and cannot be recovered; the
// gap error says so when the slot carried any. Backfill publishes a time
// range with the same code, to bootstrap or repair a consumer. On PG 17
// and later the slot is created with FAILOVER true, so that with
// synchronized_standby_slots it survives a promotion; that path is not
// tested here (PG 15). See docs/failover.md.
//
// # Pruning
//
// Prune deletes the outbox rows created before a cutoff, in small
// statements (by tableoid and ctid, so a partitioned outbox loses only
// its old rows). The cutoff is PruneAfter ago, never later than the state
// row's confirmed commit time minus BackfillMargin, and it is recorded in
// the row (pruned_before, which only rises) before anything is deleted:
// Recover then knows which rows may be gone and refuses rather than
// publish part of a range.
package slotstate
