package relay

// Where a session resumes: a gap found by the slot check, recovered under
// GapBackfill, and the position through which replayed transactions are
// skipped.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// onGap handles an error of the slot check. A gap sets pgoutbox_relay_gap;
// under GapBackfill it is recovered (onGap returns nil: check the slot
// again), otherwise returned, a permanent error that ends Run. Other errors
// pass.
func (r *Relay) onGap(ctx context.Context, err error) error {
	var gap *relaytype.GapError
	if !errors.As(err, &gap) {
		return err
	}
	r.m.Gap.WithLabelValues(gap.Slot, gap.Reason).Set(1)
	if r.cfg.OnGap != GapBackfill {
		return err
	}
	r.cfg.Logger.Warn("gap found; recovering it (--on-gap=backfill)", "error", err)
	if r.runCtx != nil {
		ctx = r.runCtx // not the session start's bound: a backfill takes its time
	}
	sk := sink.NewSink(r.stage.sink, r.m)
	defer sk.Close()
	if _, rerr := admin.RecoverGap(ctx, &r.stage.admin, r.m, sk); rerr != nil {
		return fmt.Errorf("%w (recovery failed: %w)", err, rerr)
	}
	return nil
}

// publishedThrough is the skip position of a session that resumes the slot
// described by st (see replaySkip): the end of the last transaction Kafka
// is known to hold, zero skipping nothing, and the part of the next one
// Kafka holds (Seq 0: none). committed is, in exactly-once mode, the
// progress the relays of the slot committed to Kafka for this history of
// the slot (read by the session after it fenced them, and checked by the
// sink: see sink.OpenExactlyOnce). It is the one source of that position.
//
// The state row's confirmed LSN counts in both modes. The state keeper
// writes the tracker's confirmed position (slotstate.Keeper's Keep and Settle), and
// the tracker passes a transaction only once every event of it was
// acknowledged by Kafka (at-least-once: the sink calls Tracker.Ack after a
// write with acks=all succeeded, see sink.acknowledge; exactly-once: after
// the Kafka transaction holding it committed, see sink.acknowledgeTxn),
// or moves to a keepalive's WAL end only while nothing is in flight. So
// the row never records a position before Kafka acknowledged it, and a
// row that trails only costs duplicates. In exactly-once mode the
// committed progress, written in the Kafka transaction it describes,
// trails nothing: the session skips every WAL transaction Kafka holds,
// and the part of a large one committed in parts.
//
// Either counts only when the slot check found the slot and the server
// the state row describes (st.resumable): after a gap, or on another
// system or timeline (a PG 17 failover slot after a promotion: the old
// primary's WAL past the promotion point is not the new one's), it skips
// nothing. Once a skip overshot in this run (skipOff), it skips nothing.
func (r *Relay) publishedThrough(st *slotstate.RelayState, committed sink.Progress) (pglogrepl.LSN, publish.Position) {
	if st == nil || !st.Resumable || r.skipOff.Load() {
		return 0, publish.Position{}
	}
	if r.cfg.ExactlyOnce {
		return max(st.ConfirmedLSN, committed.EndLSN), committed.Part
	}
	return st.ConfirmedLSN, publish.Position{}
}
