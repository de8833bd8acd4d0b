package slotstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/liveness"
	"github.com/pgoutbox/pgoutbox/internal/relayconfig"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
)

// Reasons of a GapError (and values of the reason label of
// pgoutbox_relay_gap).
const (
	// GapSlotMissing: the state says the slot existed, the server has no
	// such slot (a failover to a physical standby before PG 17, a
	// pg_upgrade that did not carry it, a DBA dropping it).
	GapSlotMissing = "slot-missing"
	// GapSlotLost: the server removed WAL the slot still needed
	// (wal_status lost, max_slot_wal_keep_size exceeded).
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
		return []error{relayerr.ErrGap, relayerr.ErrSlotInvalidated}
	}
	return []error{relayerr.ErrGap}
}

// SlotInfo is what the gap check needs of pg_replication_slots.
type SlotInfo struct {
	Exists    bool
	Confirmed pglogrepl.LSN
	WALStatus string
	// Failover is pg_replication_slots.failover (PG 17+): a slot kept in
	// sync on standbys, which survives a promotion.
	Failover bool
}

// CheckGap compares the slot and the server with the state row. It returns
// nil when streaming may resume from the slot's position, a *GapError
// otherwise. It asks the server for its identity (a short replication
// connection).
func CheckGap(ctx context.Context, c *relayconfig.Config, st *RelayState, slot SlotInfo) (*GapError, error) {
	_, gap, err := checkServer(ctx, c, st, slot)
	return gap, err
}

// checkServer is CheckGap that also returns the server's identity.
func checkServer(ctx context.Context, c *relayconfig.Config, st *RelayState, slot SlotInfo) (ServerIdentity, *GapError, error) {
	gap := &GapError{Slot: c.Slot, Since: st.Since(), ConfirmedLSN: st.ConfirmedLSN, MessagesSeen: st.MessagesSeen}
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
		gap.Reason, gap.Detail = GapSlotMissing, "the slot does not exist, but the relay state records it"
		if moved != "" {
			gap.Detail += ": " + moved
		}
	case slot.WALStatus == "lost":
		gap.Reason, gap.Detail = GapSlotLost, "the slot is invalidated (wal_status lost): the server removed WAL it still needed"
	case slot.Confirmed > st.Ceiling:
		gap.Reason = GapSlotRecreated
		gap.Detail = fmt.Sprintf("the slot's confirmed position %s is past the highest position this relay may confirm (%s): it was re-created or moved by something else",
			slot.Confirmed, st.Ceiling)
	case id.SystemID != st.SystemID:
		gap.Reason, gap.Detail = GapSystemChanged, moved
	case id.Timeline != st.Timeline && slot.Failover:
		// A PG 17 failover slot synchronised to the promoted standby: the
		// server kept it consistent with the WAL the standby received.
		c.Logger.Warn("the server's timeline changed; the slot is a failover slot that survived the promotion, streaming on",
			"slot", c.Slot, "from_timeline", st.Timeline, "to_timeline", id.Timeline)
		return id, nil, nil
	case id.Timeline != st.Timeline:
		gap.Reason, gap.Detail = GapTimelineChanged, moved
	default:
		if !slot.Exists || !publicationRecreated(ctx, c) {
			return id, nil, nil
		}
		gap.Reason = GapPublicationRecreated
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
func publicationRecreated(ctx context.Context, c *relayconfig.Config) bool {
	conn, err := liveness.Connect(ctx, c)
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
