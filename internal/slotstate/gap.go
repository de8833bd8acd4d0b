package slotstate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// SlotInfo is what the gap check needs of pg_replication_slots.
type SlotInfo struct {
	Exists    bool
	Confirmed pglogrepl.LSN
	WALStatus string
	// Failover is pg_replication_slots.failover (PG 17+): a slot kept in
	// sync on standbys, which survives a promotion.
	Failover bool
	// Invalidation is pg_replication_slots.invalidation_reason (PG 17+):
	// why the server invalidated the slot (wal_removed, idle_timeout...);
	// empty while it is valid, and before PG 17.
	Invalidation string
}

// CheckGap compares the slot and the server with the state row. It returns
// nil when streaming may resume from the slot's position, a *relaytype.GapError
// otherwise. It asks the server for its identity (a short replication
// connection).
func CheckGap(ctx context.Context, c *Config, st *RelayState, slot SlotInfo) (*relaytype.GapError, error) {
	_, gap, err := checkServer(ctx, c, st, slot)
	return gap, err
}

// checkServer is CheckGap that also returns the server's identity.
func checkServer(ctx context.Context, c *Config, st *RelayState, slot SlotInfo) (ServerIdentity, *relaytype.GapError, error) {
	gap := &relaytype.GapError{Slot: c.Slot, Since: st.Since(), ConfirmedLSN: st.ConfirmedLSN, MessagesSeen: st.MessagesSeen}
	id, err := Identify(ctx, c)
	if err != nil {
		return id, nil, err
	}
	var moved string
	switch {
	case id.SystemID != st.SystemID:
		moved = fmt.Sprintf("the server is another cluster (system identifier %s, the slot was created on %s: a restore, a pg_upgrade or another server)",
			id.SystemID, st.SystemID)
	case id.Timeline != st.Timeline:
		moved = fmt.Sprintf("the server's timeline changed from %d to %d since the slot was created (a failover to a standby, or a point-in-time restore)",
			st.Timeline, id.Timeline)
	}
	switch {
	case !slot.Exists:
		gap.Reason, gap.Detail = relaytype.GapSlotMissing, "the slot does not exist, but the relay state records it"
		if moved != "" {
			gap.Detail += ": " + moved
		}
	case slot.WALStatus == "lost" || slot.Invalidation != "":
		gap.Reason, gap.Detail = relaytype.GapSlotLost, invalidated(slot.Invalidation)
	case slot.Confirmed > st.Ceiling:
		gap.Reason = relaytype.GapSlotRecreated
		gap.Detail = fmt.Sprintf("the slot's confirmed position %s is past the highest position this relay may confirm (%s): it was re-created or moved by something else",
			slot.Confirmed, st.Ceiling)
	case id.SystemID != st.SystemID:
		gap.Reason, gap.Detail = relaytype.GapSystemChanged, moved
	case id.Timeline != st.Timeline && slot.Failover:
		// A PG 17 failover slot synchronised to the promoted standby: the
		// server kept it consistent with the WAL the standby received.
		c.Logger.Warn("the server's timeline changed; the slot is a failover slot that survived the promotion, streaming on",
			"slot", c.Slot, "from_timeline", st.Timeline, "to_timeline", id.Timeline)
		return id, nil, nil
	case id.Timeline != st.Timeline:
		gap.Reason, gap.Detail = relaytype.GapTimelineChanged, moved
	default:
		if !slot.Exists || !publicationRecreated(ctx, c) {
			return id, nil, nil
		}
		gap.Reason = relaytype.GapPublicationRecreated
		gap.Detail = fmt.Sprintf("publication %s is newer than the slot's position: it was dropped and created again "+
			"(or created after the slot), so the slot cannot decode past the time it was missing", c.Publication)
	}
	return id, gap, nil
}

// publicationRecreated reports whether c.Slot cannot decode with
// c.Publication because the publication is newer than the slot's history.
// A cheap test first: the publication's catalog row is at least as new as
// the oldest catalog row the slot may read (its catalog_xmin); only then
// is the slot asked to decode what follows its position, up to 10,000
// protocol messages (a peek, which confirms nothing: bounded work, enough to
// reach the drop of a publication under a relay that was keeping up),
// failing with undefined_object when the publication is missing at that
// point of its history. A slot that is streaming cannot be peeked:
// its relay would be failing on that error instead. Anything else that
// fails here is not a gap (the check is a diagnosis, not a gate).
func publicationRecreated(ctx context.Context, c *Config) bool {
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var newer bool
	err = conn.QueryRow(ctx, `SELECT age(p.xmin) <= age(s.catalog_xmin) AND s.active_pid IS NULL
		FROM pg_publication p, pg_replication_slots s
		WHERE p.pubname = $1 AND s.slot_name = $2 AND s.catalog_xmin IS NOT NULL`, c.Publication, c.Slot).Scan(&newer)
	if err != nil || !newer {
		return false
	}
	pub := `"` + strings.ReplaceAll(c.Publication, `"`, `""`) + `"`
	_, err = conn.Exec(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, 10000,
		'proto_version', '1', 'publication_names', $2)`, c.Slot, pub)
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704" // undefined_object: publication does not exist
}

// invalidated says in words why the server invalidated a slot, from
// pg_replication_slots.invalidation_reason (empty before PG 17).
func invalidated(reason string) string {
	switch reason {
	case "idle_timeout":
		return "the slot is invalidated (idle_timeout): no relay streamed it for longer than the server's idle_replication_slot_timeout " +
			"(PG 18; set it above the relay's longest outage, or 0)"
	case "rows_removed":
		return "the slot is invalidated (rows_removed): the server removed catalog rows it still needed"
	case "wal_level_insufficient":
		return "the slot is invalidated (wal_level_insufficient): wal_level was lowered below logical"
	case "", "wal_removed":
		return "the slot is invalidated (wal_status lost): the server removed WAL it still needed"
	default:
		return fmt.Sprintf("the slot is invalidated (%s)", reason)
	}
}
