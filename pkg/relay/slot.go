package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// slotRow is one reading of pg_replication_slots, pg_current_wal_lsn() and
// pg_stat_replication for the relay's slot. Pointers are nil for SQL NULL.
type slotRow struct {
	exists             bool
	active             bool
	activePID          *int32
	confirmed, restart *string
	currentWAL         string
	lag, retained      *int64
	walStatus          *string
	safeWALSize        *int64
	// From pg_stat_replication, for the walsender streaming the slot.
	appName, clientAddr, state *string
	backendStart, replyTime    *time.Time
}

// readSlot reads the slot's row. A missing slot is not an error: exists is
// false.
func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotRow, error) {
	var r slotRow
	err := conn.QueryRow(ctx, `
		SELECT s.slot_name IS NOT NULL, coalesce(s.active, false), s.active_pid,
		       s.confirmed_flush_lsn::text, s.restart_lsn::text, pg_current_wal_lsn()::text,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint,
		       s.wal_status, s.safe_wal_size,
		       r.application_name, host(r.client_addr), r.state, r.backend_start, r.reply_time
		  FROM (SELECT 1) AS one
		  LEFT JOIN pg_replication_slots s ON s.slot_name = $1
		  LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid`, slot).
		Scan(&r.exists, &r.active, &r.activePID, &r.confirmed, &r.restart, &r.currentWAL, &r.lag, &r.retained,
			&r.walStatus, &r.safeWALSize, &r.appName, &r.clientAddr, &r.state, &r.backendStart, &r.replyTime)
	if err != nil {
		return r, fmt.Errorf("relay: read slot %s: %w", slot, err)
	}
	return r, nil
}
