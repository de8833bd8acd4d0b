package relaytype

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
)

// Sentinel errors. Run, Setup, Status and Teardown wrap them with the
// details; use errors.Is.
var (
	// ErrConfig means the Config is invalid.
	ErrConfig = errors.New("relay: invalid configuration")
	// ErrSlotMissing means the slot does not exist and NoCreate is set.
	ErrSlotMissing = errors.New("relay: replication slot does not exist")
	// ErrPublicationMissing means the publication does not exist and
	// NoCreate is set.
	ErrPublicationMissing = errors.New("relay: publication does not exist")
	// ErrPublicationMismatch means the publication exists but does not
	// publish exactly the outbox table's inserts: the table or inserts
	// missing, a row filter or column list, other tables, or partitions
	// published under their own names.
	ErrPublicationMismatch = errors.New("relay: publication does not match the outbox table")
	// ErrSlotMismatch means a slot of that name exists with another output
	// plugin or in another database.
	ErrSlotMismatch = errors.New("relay: replication slot is not a pgoutput slot of this database")
	// ErrSlotActive means another process streams the slot.
	ErrSlotActive = errors.New("relay: replication slot is active")
	// ErrPublicationInUse means Teardown would drop a publication that
	// another slot streams or relays this outbox with.
	ErrPublicationInUse = errors.New("relay: publication is used by another slot")
	// ErrSlotInvalidated means the server removed WAL the slot still
	// needed (wal_status lost): events may be lost, the slot must be
	// recreated by an operator.
	ErrSlotInvalidated = errors.New("relay: replication slot invalidated (required WAL removed)")
	// ErrGap is wrapped by the GapError that stops Run when the slot
	// cannot be trusted to resume where the relay left off: events may
	// have been skipped (see docs/failover.md).
	ErrGap = errors.New("relay: gap in the replication stream")
	// ErrVerifyTopics means the rows of Verify's window route to more
	// distinct topics, or topic names of more bytes, than
	// VerifyOptions.MaxTopics and MaxTopicBytes allow.
	ErrVerifyTopics = errors.New("relay: verify: too many distinct topics")
	// ErrStateMissing means the relay's state table does not exist (see
	// StateTableName) and NoCreate is set.
	ErrStateMissing = errors.New("relay: relay state table does not exist")
	// ErrTableMissing means the outbox table does not exist.
	ErrTableMissing = errors.New("relay: outbox table does not exist")
	// ErrTableColumns means the outbox table lacks a column the relay
	// needs or has one of an unsupported type.
	ErrTableColumns = errors.New("relay: outbox table columns unusable")
	// ErrInvalidEvent is wrapped by the InvalidEventError that stops Run
	// when Config.OnInvalid is InvalidStop.
	ErrInvalidEvent = errors.New("relay: invalid outbox event")
	// ErrDeadLetter means Kafka refused a record of the dead-letter topic
	// for good (the topic does not exist, is not writable, or rejects
	// the record), so an invalid event could not be dead-lettered.
	ErrDeadLetter = errors.New("relay: kafka refused a dead-letter record")
	// ErrKafkaAuth means the brokers refused the relay's credentials or
	// permissions.
	ErrKafkaAuth = errors.New("relay: kafka refused authentication or authorization")
	// ErrFenced means, in exactly-once mode or with FenceWrites, that the
	// brokers refused the relay's transactional producer for its epoch: a
	// newer relay of the slot initialised the slot's transactional ID, or
	// the brokers aborted the relay's open transaction (it outlasted the
	// transaction timeout). Nothing of that transaction is confirmed; the
	// session ends and the next one initialises the producer again, or
	// waits as a standby when another relay holds the slot. It is not
	// permanent.
	ErrFenced = errors.New("relay: kafka transaction fenced (a newer relay of the slot, or a transaction timeout)")
	// ErrTopicUnavailable means writes to a topic failed because it does
	// not exist or the relay may not write it, for longer than
	// Config.TopicUnavailableGrace.
	ErrTopicUnavailable = errors.New("relay: kafka topic unavailable")
)

// ErrBackfillPruned means rows a recovery needs may have been deleted by
// pruning: the BackfillPrunedError names the time range.
var ErrBackfillPruned = errors.New("relay: rows needed for recovery may have been pruned")

// ErrPrerequisites is wrapped by a *PrerequisitesError: the server or the
// role lacks something the relay needs (wal_level, free slots or WAL
// senders, REPLICATION, CREATE rights, table ownership).
var ErrPrerequisites = errors.New("relay: prerequisites not met")

// InvalidEventError names an event the relay could not publish, returned by
// Run when Config.OnInvalid is InvalidStop.
type InvalidEventError struct {
	// MessageID is the event's message ID, or uuid.Nil when it has none.
	MessageID uuid.UUID
	// Reason is one of the Reason* constants of this package (the
	// invalid_events_total reason), for example "null-column".
	Reason string
	// Detail says what exactly is wrong.
	Detail string
}

// Error names the message, the reason and the detail.
func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("relay: invalid outbox event %s (%s): %s", e.MessageID, e.Reason, e.Detail)
}

// Unwrap returns ErrInvalidEvent.
func (e *InvalidEventError) Unwrap() error { return ErrInvalidEvent }

// Reasons of a GapError (and values of the reason label of
// pgoutbox_relay_gap).
const (
	// GapSlotMissing: the state says the slot existed, the server has no
	// such slot (a failover to a physical standby before PG 17, a
	// pg_upgrade that did not carry it, a DBA dropping it).
	GapSlotMissing = "slot-missing"
	// GapSlotLost: the server invalidated the slot (wal_status lost):
	// it removed WAL the slot still needed (max_slot_wal_keep_size
	// exceeded), or, on PG 18, no one streamed the slot for longer than
	// idle_replication_slot_timeout; the Detail says which.
	GapSlotLost = "slot-lost"
	// GapSlotRecreated: the slot's confirmed position is past anything
	// this relay could have confirmed: it was re-created, or moved by
	// something else (pg_replication_slot_advance, another consumer).
	GapSlotRecreated = "slot-recreated"
	// GapSystemChanged: the server is another cluster than the one the
	// slot was created on (a restore, a pg_upgrade, another server).
	GapSystemChanged = "system-changed"
	// GapTimelineChanged: the server's timeline changed since the slot
	// was created (a promotion, a point-in-time restore).
	GapTimelineChanged = "timeline-changed"
	// GapPublicationRecreated: the publication the slot must decode with
	// is newer than the slot's position (dropped and created again, by a
	// teardown of another slot for instance): the slot's history predates
	// it, so decoding fails with "publication does not exist" on every
	// start, and rows committed while it was missing were never published.
	GapPublicationRecreated = "publication-recreated"
)

// GapError says that events may have been skipped: the slot cannot be
// trusted to resume where the relay left off. Run returns it (wrapping
// ErrGap) before streaming anything; Recover repairs it.
type GapError struct {
	// Slot is the replication slot.
	Slot string
	// Reason is one of the Gap* constants.
	Reason string
	// Detail says what happened, in words.
	Detail string
	// Since is the commit time of the last transaction the relay recorded
	// as published (or the slot's creation time when none): events
	// committed after it may be missing from Kafka.
	Since time.Time
	// ConfirmedLSN is the last position the relay recorded as published.
	ConfirmedLSN pglogrepl.LSN
	// MessagesSeen is true when the relay published logical messages
	// (outbox.Writer.EmitTx) on this slot: those exist only in the WAL,
	// and a backfill from the table cannot recover them.
	MessagesSeen bool
}

// Error is one line: the slot, what happened, since when, and what to do.
func (e *GapError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay: gap on slot %s (%s): %s; events committed after %s (LSN %s) may be missing from Kafka; "+
		"the relay does not stream over a gap: run relay recover (or relay run --on-gap=backfill)",
		e.Slot, e.Reason, e.Detail, e.Since.UTC().Format(time.RFC3339), e.ConfirmedLSN)
	if e.MessagesSeen {
		b.WriteString("; events written as logical messages (EmitTx) in that time cannot be recovered from the table")
	}
	return b.String()
}

// Unwrap returns ErrGap, and ErrSlotInvalidated for a lost slot.
func (e *GapError) Unwrap() []error {
	if e.Reason == GapSlotLost {
		return []error{ErrGap, ErrSlotInvalidated}
	}
	return []error{ErrGap}
}

// BackfillPrunedError names the creation-time range of outbox rows that
// recovery would have to publish but that pruning may already have
// deleted. Recover refuses rather than publish part of it.
type BackfillPrunedError struct {
	// Slot is the replication slot.
	Slot string
	// From and To bound the range: rows created at or after From and
	// before To may be gone.
	From, To time.Time
}

// Error names the slot and the exact range.
func (e *BackfillPrunedError) Error() string {
	return fmt.Sprintf("relay: cannot recover slot %s: outbox rows created from %s to %s may have been deleted by pruning (prune's high-water mark); "+
		"events of that range cannot be recovered from the table; to give them up, run relay teardown --yes and relay setup, then relay backfill --since %s",
		e.Slot, e.From.UTC().Format(time.RFC3339Nano), e.To.UTC().Format(time.RFC3339Nano), e.To.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrBackfillPruned.
func (e *BackfillPrunedError) Unwrap() error { return ErrBackfillPruned }

// Problem is one unmet prerequisite and the statement or setting that fixes
// it.
type Problem struct {
	// Check names what was checked: "wal_level", "replication slots",
	// "wal senders", "replication role", "create", "table owner".
	Check string
	// Detail says what was found.
	Detail string
	// Fix is the statement or setting that fixes it, for the platform the
	// server looks like (self-managed, Amazon RDS/Aurora, Cloud SQL, Azure).
	Fix string
}

// PrerequisitesError lists every unmet prerequisite at once.
type PrerequisitesError struct {
	// Problems are the unmet prerequisites, in the order checked.
	Problems []Problem
}

// Error lists the problems, each with its fix, on one line.
func (e *PrerequisitesError) Error() string {
	var b strings.Builder
	b.WriteString(ErrPrerequisites.Error())
	b.WriteString(":")
	for i, p := range e.Problems {
		fmt.Fprintf(&b, " (%d) %s — fix: %s", i+1, p.Detail, p.Fix)
	}
	return b.String()
}

// Unwrap returns ErrPrerequisites.
func (e *PrerequisitesError) Unwrap() error { return ErrPrerequisites }
