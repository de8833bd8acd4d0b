package relaytype

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// StateTableName is the name of the relay's state table, created by
// outbox.Migrate (migration 002) in the outbox table's schema: one row per
// slot holding what a new primary needs to know to tell a gap from a
// replay (see docs/failover.md).
const StateTableName = "pgoutbox_relay_state"

// SlotStatus describes the relay's slot and publication as the database
// sees them. It can be read while no relay runs.
type SlotStatus struct {
	Slot              string `json:"slot"`
	Publication       string `json:"publication"`
	Table             string `json:"table"`
	SlotExists        bool   `json:"slot_exists"`
	PublicationExists bool   `json:"publication_exists"`
	// PublicationMismatch says why the relay refuses to start on the
	// publication (the table missing or not published, inserts not
	// published, other tables, a row filter or column list, a partitioned
	// table without publish_via_partition_root), with the fix where there
	// is one; empty when it can start.
	PublicationMismatch string `json:"publication_mismatch,omitempty"`
	// PublicationExtra says what the publication publishes beyond the
	// outbox inserts (updates, deletes, truncates): harmless but wasted
	// decoding. Empty when nothing.
	PublicationExtra string `json:"publication_extra,omitempty"`
	// Active is true while a walsender streams the slot; ActivePID is its
	// backend PID.
	Active    bool   `json:"active"`
	ActivePID *int32 `json:"active_pid"`
	// LSNs in the usual X/Y text form; empty when the slot is missing.
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	RestartLSN        string `json:"restart_lsn"`
	CurrentWALLSN     string `json:"current_wal_lsn"`
	// LagBytes is current WAL minus confirmed flush.
	LagBytes int64 `json:"lag_bytes"`
	// RetainedWALBytes is current WAL minus restart LSN: what the slot pins.
	RetainedWALBytes int64 `json:"retained_wal_bytes"`
	// WALStatus is pg_replication_slots.wal_status: reserved, extended,
	// unreserved or lost.
	WALStatus string `json:"wal_status"`
	// SafeWALSize is pg_replication_slots.safe_wal_size; nil when
	// max_slot_wal_keep_size is unlimited.
	SafeWALSize *int64 `json:"safe_wal_size"`
	// InvalidationReason is pg_replication_slots.invalidation_reason (PG
	// 17+): why the server invalidated the slot (wal_removed, or PG 18's
	// idle_timeout, ...); empty while it is valid.
	InvalidationReason string `json:"invalidation_reason,omitempty"`
	// InactiveStandbySlots names, for a failover slot (PG 17+), the
	// physical slots in the primary's synchronized_standby_slots that no
	// standby streams: the primary sends the relay nothing new until
	// those standbys confirm it, so the relay stalls. Empty otherwise.
	InactiveStandbySlots []string `json:"inactive_standby_slots,omitempty"`

	// The process streaming the slot, from pg_stat_replication; empty or
	// nil while the slot is not active. ActiveApplicationName is
	// "pgoutbox-relay" for a relay unless its database URL sets
	// application_name; ActiveClientAddr is empty for a Unix socket.
	ActiveApplicationName string `json:"active_application_name,omitempty"`
	ActiveClientAddr      string `json:"active_client_addr,omitempty"`
	// ActiveState is the walsender state: "streaming" once it caught up
	// with the WAL, "catchup" before.
	ActiveState string `json:"active_state,omitempty"`
	// ActiveBackendStart is when the streaming connection was opened.
	ActiveBackendStart *time.Time `json:"active_backend_start,omitempty"`
	// ActiveReplyTime is when the streaming process last sent a status
	// update (an acknowledgement).
	ActiveReplyTime *time.Time `json:"active_reply_time,omitempty"`

	// OtherSlots describes, one string each, the other slots of the
	// database that relay this outbox (a relay state row) or stream its
	// publication, e.g. "pgoutbox (streaming, pid 4242; publication
	// pgoutbox; a relay slot of this outbox)". Each slot publishes every
	// outbox row: two are either deliberate or a mistyped --slot. Empty
	// when none.
	OtherSlots []string `json:"other_slots,omitempty"`
	// ForeignSlot, when not empty, says whose the slot of this name is:
	// slot names are per server, and this one belongs to another database
	// of it (or is not a pgoutput slot), e.g. "database billing, plugin
	// pgoutput". SlotExists is then false and the slot fields are empty:
	// that slot is never presented as this relay's.
	ForeignSlot string `json:"foreign_slot,omitempty"`

	// TableExists is false when the outbox table does not exist.
	TableExists bool `json:"table_exists"`
	// State is the slot's row of the relay state table; nil when there is
	// none (or no state table).
	State *StateStatus `json:"state,omitempty"`
	// Gap describes the gap Run would stop on; nil when none.
	Gap *GapStatus `json:"gap,omitempty"`
	// Progress is, when the configuration is exactly-once (ExactlyOnce,
	// with Brokers), the progress committed to Kafka; nil otherwise.
	Progress *ProgressStatus `json:"progress,omitempty"`
	// Problems lists in words what keeps the relay from streaming
	// healthily: a missing table, state table, publication or slot, a
	// publication mismatch, a gap, a lost slot, no active relay. Empty when
	// healthy.
	Problems []string `json:"problems"`
}

// StateStatus is the slot's row of the relay state table (see
// StateTableName), LSNs in the X/Y text form.
type StateStatus struct {
	SystemIdentifier string    `json:"system_identifier"`
	Timeline         int32     `json:"timeline"`
	SlotCreatedLSN   string    `json:"slot_created_lsn"`
	SlotCreatedAt    time.Time `json:"slot_created_at"`
	// Incarnation is the random identity made with the slot, part of the
	// exactly-once progress key and transactional ID; empty in a row of
	// before incarnations (the relay gives it one at its next start).
	Incarnation string `json:"incarnation,omitempty"`
	// ConfirmedLSN and ConfirmedCommitTime are the last transaction the
	// relay recorded as published (they trail the slot a little).
	ConfirmedLSN        string     `json:"confirmed_lsn"`
	ConfirmedCommitTime *time.Time `json:"confirmed_commit_time"`
	// CeilingLSN is the position the relay may confirm up to.
	CeilingLSN   string `json:"ceiling_lsn"`
	MessagesSeen bool   `json:"messages_seen"`
	// PrunedBefore is prune's high-water mark: rows created before it
	// may have been deleted.
	PrunedBefore *time.Time `json:"pruned_before"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// GapStatus is a gap as relay status shows it (see GapError).
type GapStatus struct {
	Reason       string    `json:"reason"`
	Detail       string    `json:"detail"`
	Since        time.Time `json:"since"`
	ConfirmedLSN string    `json:"confirmed_lsn"`
	MessagesSeen bool      `json:"messages_seen"`
	// Message is the error Run stops with.
	Message string `json:"message"`
}

// ProgressStatus is the exactly-once progress of a slot as Kafka holds
// it (see SlotStatus.Progress).
type ProgressStatus struct {
	// Topic and Key locate the progress record; Key is also the
	// transactional ID of the relays of the slot.
	Topic string `json:"topic"`
	Key   string `json:"key"`
	// Found is false while no relay of the slot has committed a Kafka
	// transaction.
	Found bool `json:"found"`
	// CommittedLSN is the end LSN of the last WAL transaction committed
	// to Kafka; CommitTime is its commit time in Postgres.
	CommittedLSN string     `json:"committed_lsn,omitempty"`
	CommitTime   *time.Time `json:"commit_time,omitempty"`
	// Trusted is whether a session starting now would skip the WAL the
	// progress covers: a relay wrote it for the slot's history, and it is
	// past neither the server's WAL nor the state row's ceiling (what
	// the database recorded before the Kafka commit). Trust says why, or
	// why not.
	Trusted bool   `json:"trusted"`
	Trust   string `json:"trust,omitempty"`
	// Error says why the progress could not be read; empty when it was.
	Error string `json:"error,omitempty"`
}

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
	// AlreadyHeld is the number of rows of the range not published
	// because the broker already held a record of their message ID (in
	// their topic or the dead-letter topic; Kafka's read read_committed).
	AlreadyHeld int
	// InKafka is AlreadyHeld, whichever the broker.
	//
	// Deprecated: use AlreadyHeld; the relay publishes to NATS and
	// RabbitMQ too.
	InKafka int
	// SlotLSN is the new slot's consistent point: streaming resumes there.
	SlotLSN pglogrepl.LSN
}
