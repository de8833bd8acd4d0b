package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// statusHealth fills st's table, state and gap fields and lists its
// problems.
func statusHealth(ctx context.Context, conn *pgx.Conn, c *Config, st *relaytype.SlotStatus) error {
	problem := func(format string, args ...any) { st.Problems = append(st.Problems, fmt.Sprintf(format, args...)) }
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, st.Table).Scan(&st.TableExists); err != nil {
		return fmt.Errorf("relay: look up table %s: %w", st.Table, err)
	}
	switch {
	case st.TableExists:
	case tableformat.Shape(c.TableFormat).CreatesTable:
		problem("table %q does not exist (relay setup creates it)", st.Table)
	default: // Setup creates only tables of the pgoutbox format
		problem("table %q does not exist (relay setup creates tables of the pgoutbox format only: create the %s outbox table, then run relay setup --table-format %s)",
			st.Table, c.TableFormat, c.TableFormat)
	}
	if !st.PublicationExists {
		problem("publication %q does not exist (relay setup creates it)", st.Publication)
	} else if st.PublicationMismatch != "" {
		problem("%s", st.PublicationMismatch)
	}
	rs, err := slotstate.ReadState(ctx, conn, &c.Config)
	switch {
	case errors.Is(err, relaytype.ErrStateMissing):
		problem("relay state table %q does not exist (relay setup creates it)", slotstate.StateTable(&c.Config).String())
	case err != nil:
		return err
	case rs != nil:
		st.State = &relaytype.StateStatus{
			SystemIdentifier: rs.SystemID, Timeline: rs.Timeline, SlotCreatedLSN: rs.CreatedLSN.String(), SlotCreatedAt: rs.CreatedAt,
			Incarnation:  rs.Incarnation,
			ConfirmedLSN: rs.ConfirmedLSN.String(), ConfirmedCommitTime: rs.ConfirmedAt, CeilingLSN: rs.Ceiling.String(),
			MessagesSeen: rs.MessagesSeen, PrunedBefore: rs.PrunedBefore, UpdatedAt: rs.UpdatedAt,
		}
		info := slotstate.SlotInfo{Exists: st.SlotExists, WALStatus: st.WALStatus, Invalidation: st.InvalidationReason}
		if st.SlotExists && st.WALStatus != "lost" && st.InvalidationReason == "" {
			if info.Confirmed, err = pglogrepl.ParseLSN(st.ConfirmedFlushLSN); err != nil {
				return fmt.Errorf("relay: slot %s confirmed_flush_lsn %q: %w", c.Slot, st.ConfirmedFlushLSN, err)
			}
			if err := conn.QueryRow(ctx, `SELECT coalesce((to_jsonb(s) ->> 'failover')::boolean, false)
				FROM pg_replication_slots s WHERE slot_name = $1`, c.Slot).Scan(&info.Failover); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("relay: read slot %s: %w", c.Slot, err)
			}
		}
		gap, err := slotstate.CheckGap(ctx, &c.Config, rs, info)
		if err != nil {
			// A user without REPLICATION cannot ask the server's
			// identity; the rest of the status still stands.
			problem("cannot check for a gap: %v", err)
		}
		if gap != nil {
			st.Gap = &relaytype.GapStatus{Reason: gap.Reason, Detail: gap.Detail, Since: gap.Since, ConfirmedLSN: gap.ConfirmedLSN.String(),
				MessagesSeen: gap.MessagesSeen, Message: gap.Error()}
			problem("%s", gap.Error())
		}
	}
	if st.Gap == nil {
		switch {
		case st.ForeignSlot != "":
			problem("slot %q is not this database's (%s): slot names are per server; give this source a slot name of its own (--slot)", st.Slot, st.ForeignSlot)
		case !st.SlotExists:
			problem("slot %q does not exist (relay setup creates it)", st.Slot)
		case st.WALStatus == "lost":
			problem("slot %q has wal_status lost: the WAL it needs was removed; it cannot be resumed", st.Slot)
		}
	}
	if len(st.InactiveStandbySlots) > 0 {
		problem("the failover slot %q waits for standby slot %s named in synchronized_standby_slots, which no standby streams: "+
			"the primary sends the relay nothing new until that standby confirms it (bring the standby back, or remove it from synchronized_standby_slots and reload)",
			st.Slot, strings.Join(st.InactiveStandbySlots, ", "))
	}
	if st.SlotExists && !st.Active && st.WALStatus != "lost" && st.Gap == nil {
		problem("no relay streams slot %q (it is not active)", st.Slot)
	}
	return nil
}
