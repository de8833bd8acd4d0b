package relay

import (
	"context"
	"errors"
)

// SlotStatus describes the relay's slot and publication as the database
// sees them. It can be read while no relay runs.
type SlotStatus struct {
	Slot              string `json:"slot"`
	Publication       string `json:"publication"`
	Table             string `json:"table"`
	SlotExists        bool   `json:"slot_exists"`
	PublicationExists bool   `json:"publication_exists"`
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
}

// Setup creates, idempotently, the outbox table, the publication (FOR TABLE
// the outbox WITH (publish = 'insert')) and the slot (pgoutput).
func Setup(ctx context.Context, cfg *Config) error {
	return errors.New("relay: not implemented yet (contract skeleton)")
}

// Status reads the slot and publication state from the database.
func Status(ctx context.Context, cfg *Config) (*SlotStatus, error) {
	return nil, errors.New("relay: not implemented yet (contract skeleton)")
}

// Teardown drops the slot and the publication (not the table). An active
// slot is an error.
func Teardown(ctx context.Context, cfg *Config) error {
	return errors.New("relay: not implemented yet (contract skeleton)")
}
