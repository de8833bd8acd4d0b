package slotstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// SlotRow is one reading of pg_replication_slots, pg_current_wal_lsn() and
// pg_stat_replication for the relay's slot. Pointers are nil for SQL NULL.
type SlotRow struct {
	Exists             bool
	Active             bool
	ActivePID          *int32
	Confirmed, Restart *string
	CurrentWAL         string
	Lag, Retained      *int64
	WALStatus          *string
	SafeWALSize        *int64
	// Invalidation is invalidation_reason (PG 17+), empty while the slot
	// is valid.
	Invalidation string
	// StandbyWait names the physical slots in synchronized_standby_slots
	// (PG 17+) that no standby streams (inactive or missing), when the
	// slot is a failover slot: the primary sends the slot's changes only
	// once those standbys confirmed them, so the relay stalls.
	StandbyWait []string
	// From pg_stat_replication, for the walsender streaming the slot.
	AppName, ClientAddr, State *string
	BackendStart, ReplyTime    *time.Time
}

// ReadSlot reads the slot's row. A missing slot is not an error: exists is
// false.
func ReadSlot(ctx context.Context, conn *pgx.Conn, slot string) (SlotRow, error) {
	var r SlotRow
	err := conn.QueryRow(ctx, `
		SELECT s.slot_name IS NOT NULL, coalesce(s.active, false), s.active_pid,
		       s.confirmed_flush_lsn::text, s.restart_lsn::text, pg_current_wal_lsn()::text,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint,
		       s.wal_status, s.safe_wal_size, coalesce(to_jsonb(s) ->> 'invalidation_reason', ''),
		       coalesce((SELECT array_agg(w.name ORDER BY w.name)
		                   FROM unnest(string_to_array(coalesce(current_setting('synchronized_standby_slots', true), ''), ',')) AS u(item),
		                        LATERAL (SELECT btrim(u.item, ' "') AS name) AS w
		                   LEFT JOIN pg_replication_slots p ON p.slot_name = w.name
		                  WHERE w.name <> '' AND coalesce((to_jsonb(s) ->> 'failover')::boolean, false)
		                    AND NOT coalesce(p.active, false)), '{}'),
		       r.application_name, host(r.client_addr), r.state, r.backend_start, r.reply_time
		  FROM (SELECT 1) AS one
		  LEFT JOIN pg_replication_slots s ON s.slot_name = $1
		  LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid`, slot).
		Scan(&r.Exists, &r.Active, &r.ActivePID, &r.Confirmed, &r.Restart, &r.CurrentWAL, &r.Lag, &r.Retained,
			&r.WALStatus, &r.SafeWALSize, &r.Invalidation, &r.StandbyWait, &r.AppName, &r.ClientAddr, &r.State, &r.BackendStart, &r.ReplyTime)
	if err != nil {
		return r, fmt.Errorf("relay: read slot %s: %w", slot, err)
	}
	return r, nil
}

// EnsureSlot checks the slot against the relay state (creating the state
// table when missing, unless c.NoCreate) and returns the slot's confirmed
// flush position and its state row. It creates the slot only when there is
// no state row for it (setup, or a first start; unless c.NoCreate): a
// missing slot with a state row is a gap (a *relaytype.GapError), never re-created,
// since a new slot starts at the current WAL position and would skip every
// event committed since the last confirmation.
func EnsureSlot(ctx context.Context, conn *pgx.Conn, c *Config, setup bool) (pglogrepl.LSN, *RelayState, error) {
	if err := ensureStateTable(ctx, conn, c); err != nil {
		return 0, nil, err
	}
	for attempt := 0; ; attempt++ {
		// The slot first, then the state row: a relay streaming the slot
		// meanwhile raises the ceiling before it confirms past it, so the
		// ceiling read second is at least the confirmed position read
		// first. In the other order a standby's check can see a ceiling
		// older than the confirmed position: a false gap.
		row, err := readSlotCheck(ctx, conn, c.Slot)
		st, stErr := ReadState(ctx, conn, c)
		if stErr != nil {
			return 0, nil, stErr
		}
		if err == nil {
			lsn, adopted, err := resumeSlot(ctx, conn, c, row, st)
			if err != nil {
				return 0, nil, err
			}
			if adopted {
				continue
			}
			if st != nil && st.Incarnation == "" {
				// A row of before incarnations (an upgrade).
				if err := setIncarnation(ctx, conn, c, st, ""); err != nil {
					return 0, nil, err
				}
			}
			return lsn, st, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, nil, fmt.Errorf("relay: read slot %s: %w", c.Slot, err)
		}
		if err := replaceMissingSlot(ctx, conn, c, st, attempt, setup); err != nil {
			return 0, nil, err
		}
	}
}

// slotCheck is what EnsureSlot reads of the slot in pg_replication_slots.
type slotCheck struct {
	plugin, database, walStatus *string
	sameDB, failover            bool
	confirmed                   *string
	invalidation                string // invalidation_reason, PG 17+
}

// readSlotCheck reads the slot for EnsureSlot; pgx.ErrNoRows when there is
// none.
func readSlotCheck(ctx context.Context, conn *pgx.Conn, slot string) (slotCheck, error) {
	var s slotCheck
	err := conn.QueryRow(ctx, `SELECT plugin, database, database = current_database(), wal_status, confirmed_flush_lsn::text,
		coalesce((to_jsonb(s) ->> 'failover')::boolean, false), coalesce(to_jsonb(s) ->> 'invalidation_reason', '')
		FROM pg_replication_slots s WHERE slot_name = $1`, slot).Scan(&s.plugin, &s.database, &s.sameDB, &s.walStatus, &s.confirmed, &s.failover, &s.invalidation)
	return s, err
}

// resumeSlot checks that the existing slot can resume where the state row
// st says the relay left off, and returns its confirmed position; it marks
// st resumable when the server is the one st describes. Without a
// state row it adopts the slot (writes a state row for it) and reports
// adopted: read both again.
func resumeSlot(ctx context.Context, conn *pgx.Conn, c *Config, row slotCheck, st *RelayState) (lsn pglogrepl.LSN, adopted bool, err error) {
	if Deref(row.plugin) != "pgoutput" || !row.sameDB {
		return 0, false, fmt.Errorf("%w: slot %s has plugin %q in database %q (slot names are cluster-wide: choose another with --slot)",
			relaytype.ErrSlotMismatch, c.Slot, Deref(row.plugin), Deref(row.database))
	}
	walStatus := Deref(row.walStatus)
	lost := walStatus == "lost" || row.invalidation != ""
	lsn, err = pglogrepl.ParseLSN(Deref(row.confirmed))
	if err != nil && !lost {
		return 0, false, fmt.Errorf("relay: slot %s confirmed_flush_lsn %q: %w", c.Slot, Deref(row.confirmed), err)
	}
	if st == nil {
		if lost {
			return 0, false, fmt.Errorf("%w: slot %s: %s; events committed while it was behind may be lost; recreate it with relay teardown and relay setup",
				relaytype.ErrSlotInvalidated, c.Slot, invalidated(row.invalidation))
		}
		return 0, true, adoptSlot(ctx, conn, c, lsn)
	}
	id, gap, err := checkServer(ctx, c, st, SlotInfo{Exists: true, Confirmed: lsn, WALStatus: walStatus, Failover: row.failover, Invalidation: row.invalidation})
	if err != nil {
		return 0, false, err
	}
	if gap != nil {
		return 0, false, gap
	}
	st.Resumable = id == st.ServerIdentity
	if id.Timeline != st.Timeline {
		// A failover slot that survived a promotion (checkServer let it
		// pass): this session skips nothing, later ones skip by what they
		// confirm on the new timeline.
		if err := recordTimeline(ctx, conn, c, st, id.Timeline); err != nil {
			return 0, false, err
		}
	}
	if walStatus == "unreserved" {
		c.Logger.Warn("replication slot is about to lose WAL it needs (wal_status unreserved): the relay is far behind",
			"slot", c.Slot)
	}
	return lsn, false, nil
}

// replaceMissingSlot handles a slot that does not exist: with a state row
// st it is a gap (never re-created), with NoCreate an error; otherwise it
// creates the slot, tolerating one created concurrently on the first
// attempt. nil means: read the slot again.
func replaceMissingSlot(ctx context.Context, conn *pgx.Conn, c *Config, st *RelayState, attempt int, setup bool) error {
	if st != nil {
		gap, err := CheckGap(ctx, c, st, SlotInfo{})
		if err != nil {
			return err
		}
		return gap
	}
	if c.NoCreate {
		return fmt.Errorf("%w: %s (run relay setup, or allow creation)", relaytype.ErrSlotMissing, c.Slot)
	}
	if err := createSlot(ctx, conn, c, setup); err != nil {
		var pgErr *pgconn.PgError
		if !(errors.As(err, &pgErr) && pgErr.Code == "42710" && attempt == 0) { // created concurrently
			return err
		}
	}
	return nil
}

// createSlot creates the slot and records its state row. Outside setup
// (Run's first start, with no slot and no state row of that name) it says so
// at Warn: a mistyped slot name makes a new slot that pins WAL from now on;
// and it refuses when another slot relays the same outbox (PeerSlots), which
// a mistyped name beside the real relay would duplicate. Setup creates it
// anyway, with a warning.
func createSlot(ctx context.Context, conn *pgx.Conn, c *Config, setup bool) error {
	peers, err := PeerSlots(ctx, conn, c)
	if err != nil {
		return err
	}
	if len(peers) > 0 && !setup {
		// A second slot on the same outbox publishes every row again: a
		// mistyped --slot beside the real relay. Only setup creates it.
		return fmt.Errorf("%w: %s, and relay run creates a slot on a first start only when no other slot relays %s: "+
			"%s already does (a second slot publishes every row again). If --slot is mistyped, use the existing name; "+
			"to run a second relay of this outbox on purpose, create its slot first with relay setup --slot %s",
			relaytype.ErrSlotMissing, c.Slot, c.Table, PeerNames(peers), c.Slot)
	}
	rc, err := pgconnect.ConnectReplication(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	ns, err := CreateSlotOn(ctx, rc, c, false)
	if err != nil {
		return err
	}
	if err := WriteNewState(ctx, conn, c, ns, nil); err != nil {
		return err
	}
	if setup && len(peers) > 0 {
		c.Logger.Warn("created replication slot "+c.Slot+" beside "+PeerNames(peers)+": each slot publishes every outbox row. "+
			"If that is a mistake, drop the new slot alone: "+TeardownSlotOnly(c.Slot),
			"slot", c.Slot, "consistent_point", ns.Consistent.String())
		return nil
	}
	if setup {
		c.Logger.Info("created replication slot", "slot", c.Slot, "consistent_point", ns.Consistent.String())
		return nil
	}
	c.Logger.Warn("created replication slot "+c.Slot+": no slot and no relay state row had that name, so this is a first start. "+
		"If the slot name is mistyped, stop the relay and drop the new slot alone ("+TeardownSlotOnly(c.Slot)+"): "+
		"it holds WAL from now on. Use relay setup and --no-create to make relay run never create one",
		"slot", c.Slot, "consistent_point", ns.Consistent.String())
	return nil
}

// TeardownSlotOnly is the command that drops slot and its state row and
// nothing else (never the publication another slot may use).
func TeardownSlotOnly(slot string) string {
	return "relay teardown --slot " + slot + " --slot-only --yes"
}

// NewSlot is a slot just created.
type NewSlot struct {
	Consistent pglogrepl.LSN
	Snapshot   string // exported snapshot; empty unless asked for
	id         ServerIdentity
	At         time.Time // server time right after the creation
}

// serverMajor returns the major version from the server_version parameter
// ("15.5 (Debian 15.5-1.pgdg120+1)" is 15); 0 when unknown.
func serverMajor(rc *pgconn.PgConn) int {
	v := rc.ParameterStatus("server_version")
	if i := strings.IndexAny(v, ". ("); i >= 0 {
		v = v[:i]
	}
	n, _ := strconv.Atoi(v)
	return n
}

// CreateSlotOn creates c.Slot on the replication connection rc and
// identifies the server. With export, the slot's snapshot is exported: it
// stays valid until rc runs its next command or closes. On PG 17 and later
// the slot is a failover slot (FAILOVER true): with
// synchronized_standby_slots and sync_replication_slots configured, it
// survives a promotion of a physical standby.
func CreateSlotOn(ctx context.Context, rc *pgconn.PgConn, c *Config, export bool) (NewSlot, error) {
	res, err := pglogrepl.IdentifySystem(ctx, rc)
	if err != nil {
		return NewSlot{}, fmt.Errorf("relay: identify system: %w", err)
	}
	var cmd string
	if serverMajor(rc) >= 17 {
		snap := "nothing"
		if export {
			snap = "export"
		}
		cmd = fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT '%s', FAILOVER true)", c.Slot, snap)
	} else {
		action := "NOEXPORT_SNAPSHOT"
		if export {
			action = "EXPORT_SNAPSHOT"
		}
		cmd = fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput %s", c.Slot, action) // slot names are [a-z0-9_]
	}
	created, err := pglogrepl.ParseCreateReplicationSlot(rc.Exec(ctx, cmd))
	if err != nil {
		return NewSlot{}, fmt.Errorf("relay: create slot %s: %w", c.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(created.ConsistentPoint)
	if err != nil {
		return NewSlot{}, fmt.Errorf("relay: create slot %s: consistent point %q: %w", c.Slot, created.ConsistentPoint, err)
	}
	return NewSlot{Consistent: lsn, Snapshot: created.SnapshotName, id: ServerIdentity{res.SystemID, res.Timeline}, At: time.Now()}, nil
}

// Deref returns *p, or the zero value for nil (a NULL column).
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
