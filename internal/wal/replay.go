package wal

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// replaySkip drops, in one session, the replayed transactions that Kafka
// already has.
//
// PG 15 moves a slot's confirmed position back to its last checkpoint after
// a server restart, so a session may start minutes of WAL behind what Kafka
// acknowledged. At session start the relay takes one position, through:
// Kafka holds every event of every transaction of the slot that ends at or
// before it (package relay's publishedThrough says where it comes from). The session
// neither publishes those transactions nor lets them hold back
// confirmation: the stream registers them with the tracker without events,
// so they complete in commit order as empty transactions do, and the slot
// is confirmed past them as the contiguous-prefix rule allows.
//
// A transaction is judged at its BEGIN, before any of its events is
// queued, by where its commit record starts (BEGIN's final LSN): skipped
// when that is before through, which is the test Postgres itself applies
// to a slot's confirmed_flush_lsn when decoding resumes. through is the end
// of a transaction or a WAL end the server reported with nothing decoded
// past it, so a commit record that starts before it also ends at or before
// it. The COMMIT's end LSN checks that; should it not hold, the transaction
// is not confirmed, the session ends with errSkipOvershoot, and the relay
// skips nothing in later sessions (see Stream.SkipOvershot).
//
// In exactly-once mode Kafka may also hold a part of the transaction that
// follows through (a large one, committed in parts: see internal/sink's
// exactlyonce.go): part names it by its final LSN and the count of its
// events Kafka holds. The session drops those events and publishes the
// rest; the transaction is confirmed once they are acknowledged. Should it
// hold fewer events than part says, it ends like an overshoot.
//
// A nil *replaySkip skips nothing.
type replaySkip struct {
	through pglogrepl.LSN
	part    publish.Position // Kafka holds the events before part.Seq of the transaction at part.Final
	log     *slog.Logger
	skipped prometheus.Counter // pgoutbox_relay_replay_skipped_total

	txs, events int  // skipped so far in this session
	active      bool // the current transaction is skipped
	inPart      bool // the current transaction is part's
	left        int  // events of part's transaction still to drop
	over        bool // the replay passed through; the count was logged
	overshot    bool // a skipped transaction ended past through
}

// errSkipOvershoot ends a session that skipped a transaction ending past
// the skip position (see replaySkip).
var errSkipOvershoot = errors.New("relay: a replayed transaction judged already published ends past the acknowledged position")

// newReplaySkip returns the skip of a session that starts streaming at
// start, or nil when neither through nor part is past start (nothing to
// skip).
func newReplaySkip(through pglogrepl.LSN, part publish.Position, start pglogrepl.LSN, log *slog.Logger, skipped prometheus.Counter) *replaySkip {
	if part.Seq <= 0 || part.Final < through || part.Final < start {
		part = publish.Position{}
	}
	if through <= start && part.Seq == 0 {
		return nil
	}
	return &replaySkip{through: through, part: part, log: log, skipped: skipped}
}

// begin judges the transaction whose commit record starts at final.
func (k *replaySkip) begin(final pglogrepl.LSN) {
	if k == nil || k.over {
		return
	}
	switch {
	case final < k.through:
		k.active = true
	case k.part.Seq > 0 && final == k.part.Final:
		k.inPart, k.left = true, k.part.Seq
	case k.part.Seq > 0 && final < k.part.Final:
		// Between through and part's transaction: published as usual.
	default:
		k.done()
	}
}

// skipping reports whether the current transaction's next event is
// skipped: it is dropped (and counted).
func (k *replaySkip) skipping() bool {
	switch {
	case k == nil:
		return false
	case k.active:
	case k.left > 0:
		k.left--
	default:
		return false
	}
	k.events++
	return true
}

// commit ends the current transaction, which ends at end. It returns
// errSkipOvershoot when a skipped transaction ends past through, or part's
// transaction held fewer events than part says; the caller must then not
// confirm it.
func (k *replaySkip) commit(end pglogrepl.LSN) error {
	switch {
	case k == nil:
		return nil
	case k.inPart:
		k.inPart = false
		if k.left > 0 {
			k.overshot = true
			return fmt.Errorf("%w: the transaction at %s held %d events, fewer than the %d committed; skipping replays is off for this run",
				errSkipOvershoot, k.part.Final, k.part.Seq-k.left, k.part.Seq)
		}
		k.txs++
		k.skipped.Inc()
		k.done()
		return nil
	case !k.active:
		return nil
	}
	k.active = false
	if end > k.through {
		k.overshot = true
		return fmt.Errorf("%w: it ends at %s, past %s; skipping replays is off for this run", errSkipOvershoot, end, k.through)
	}
	k.txs++
	k.skipped.Inc()
	return nil
}

// passed notes a server WAL end read outside a transaction: at or past
// through (and past part's commit record), no transaction left to stream
// can be skipped.
func (k *replaySkip) passed(walEnd pglogrepl.LSN) {
	if k != nil && !k.over && walEnd >= k.through && (k.part.Seq == 0 || walEnd > k.part.Final) {
		k.done()
	}
}

// done ends the skipping and logs, once, what it skipped. Stream.Run calls
// it when it returns too.
func (k *replaySkip) done() {
	if k == nil || k.over {
		return
	}
	k.over = true
	if k.txs == 0 {
		return
	}
	attrs := []any{"transactions", k.txs, "events", k.events, "through", k.through.String()}
	if k.part.Seq > 0 {
		attrs = append(attrs, "part_of", k.part.Final.String(), "part_events", k.part.Seq)
	}
	k.log.Info("skipped replayed transactions that Kafka already had", attrs...)
}
