package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
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
// A nil *replaySkip skips nothing.
type replaySkip struct {
	through pglogrepl.LSN
	log     *slog.Logger
	skipped prometheus.Counter // pgoutbox_relay_replay_skipped_total

	txs, events int  // skipped so far in this session
	active      bool // the current transaction is skipped
	over        bool // the replay passed through; the count was logged
	overshot    bool // a skipped transaction ended past through
}

// errSkipOvershoot ends a session that skipped a transaction ending past
// the skip position (see replaySkip).
var errSkipOvershoot = errors.New("relay: a replayed transaction judged already published ends past the acknowledged position")

// newReplaySkip returns the skip of a session that starts streaming at
// start, or nil when through is not past start (nothing to skip).
func newReplaySkip(through, start pglogrepl.LSN, log *slog.Logger, skipped prometheus.Counter) *replaySkip {
	if through <= start {
		return nil
	}
	return &replaySkip{through: through, log: log, skipped: skipped}
}

// begin judges the transaction whose commit record starts at final.
func (k *replaySkip) begin(final pglogrepl.LSN) {
	if k == nil || k.over {
		return
	}
	if final >= k.through {
		k.done()
		return
	}
	k.active = true
}

// skipping reports whether the current transaction is skipped: its events
// are dropped (and counted).
func (k *replaySkip) skipping() bool {
	if k == nil || !k.active {
		return false
	}
	k.events++
	return true
}

// commit ends the current transaction, which ends at end. It returns
// errSkipOvershoot when a skipped transaction ends past through; the
// caller must then not confirm it.
func (k *replaySkip) commit(end pglogrepl.LSN) error {
	if k == nil || !k.active {
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
// through, no transaction left to stream can be skipped.
func (k *replaySkip) passed(walEnd pglogrepl.LSN) {
	if k != nil && !k.over && walEnd >= k.through {
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
	if k.txs > 0 {
		k.log.Info("skipped replayed transactions that Kafka already had", "transactions", k.txs, "events", k.events,
			"through", k.through.String())
	}
}

// beginFinalLSN returns the final LSN of a pgoutput Begin message (where
// the transaction's commit record starts): Byte1('B'), Int64 final LSN,
// Int64 commit time, Int32 xid. The decoder has already parsed it.
func beginFinalLSN(data []byte) pglogrepl.LSN {
	return pglogrepl.LSN(binary.BigEndian.Uint64(data[1:9]))
}
