package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/wal"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// errSinkFailed is the cause with which a failing sink ends the reader.
var errSinkFailed = errors.New("relay: the kafka sink failed")

// session streams the slot over one replication connection. Everything in
// memory (queue, tracker) lives and dies with it; the next session resumes
// from the slot's confirmed position.
func (r *Relay) session(ctx context.Context, sk *sink.Sink) error {
	c := &r.cfg
	start, state, err := r.prepareStream(ctx, r.checkConfig()) // unbounded: it may recover a gap
	if err != nil {
		return err
	}
	conn, lv, err := startStream(ctx, c, start)
	if err != nil {
		return err
	}
	var committed sink.Progress
	// The slot's WAL history names the session's writer at a broker that
	// deduplicates per writer (RabbitMQ streams' producer name).
	writer := sink.WriterKey(c.Slot, sink.History{SystemID: state.SystemID, Timeline: state.Timeline, Incarnation: state.Incarnation})
	fenceWrites := c.FenceWrites && !c.ExactlyOnce
	if c.ExactlyOnce || fenceWrites {
		// The Kafka dials below are guarded by the liveness clock: start
		// it with this connection, not the last session's silence (after
		// an outage longer than the bound, every dial was refused).
		r.live.Begin(time.Now(), lv.Bound)
	}
	switch {
	case c.ExactlyOnce:
		// Holding the slot (a standby never gets here): fence the relays
		// of the slot before us and read what they committed.
		committed, err = r.fence(ctx, sk, state)
	case fenceWrites:
		// Holding the slot: fence the relays of the slot before us, so
		// that no write of theirs lands after ours.
		err = sk.OpenFenced(ctx, sink.ProgressKey(state.SystemID, c.Slot, state.Incarnation), writer)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return err
	}
	through, part := r.publishedThrough(state, committed)
	defer conn.Close(context.WithoutCancel(ctx))
	cat, err := slotstate.OpenCatalog(ctx, r.stage.slot)
	if err != nil {
		return err
	}
	defer cat.Close()
	cat.Watch()
	tr := acktrack.New(uint64(start))
	r.lead(tr, lv, start)
	defer r.stepDown()

	shared := c.SharedBuffer
	if shared == nil {
		shared = queue.NewShared(int64(c.BufferBytes))
	}
	q := queue.NewQueueOf(c.BatchSize, queue.NewBudget(shared, c.BufferBytes, r.m.BufferBytes))
	// Events still queued when the session ends are dropped with it.
	defer q.Budget.Leave()
	readCtx, stopRead := context.WithCancelCause(ctx)
	defer stopRead(nil)
	if !c.ExactlyOnce && !fenceWrites {
		if err := sk.OpenSlot(ctx, writer); err != nil {
			return err
		}
	}
	sinking := runSink(ctx, sk, q, tr, stopRead)
	defer sinking.stop()

	st := wal.NewStream(wal.StreamConfig{
		Config: r.stage.wal, Metrics: r.m, Live: &r.live, Conn: conn, Start: start, Timing: lv,
		Decoder: decode.NewDecoder(r.stage.decode, cat), Catalog: cat, Tracker: tr, Queue: q, Keeper: r.state,
		SkipThrough: through, SkipPart: part,
	})
	readErr := st.Run(readCtx)
	q.Close()
	if st.SkipOvershot() {
		r.skipOff.Store(true)
	}

	end := sessionEnd(ctx.Err(), context.Cause(readCtx), readErr)
	sinkErr := sinking.wait(end.graceful(), c, tr)
	// Confirm what Kafka acknowledged; on a broken connection this fails
	// harmlessly.
	cat.Recheck()
	if end.graceful() {
		r.state.Settle(cat.Fenced(tr.Confirmed()), slotstate.StateSettle)
	}
	if errors.Is(sinkErr, relaytype.ErrFenced) {
		// A newer relay of the slot holds it: confirm nothing.
		return sinkErr
	}
	if err := st.SendStandbyStatus(); err == nil && end.graceful() {
		c.Logger.Info("stopped", "confirmed_lsn", pglogrepl.LSN(tr.Confirmed()).String())
	}
	switch {
	case sinkErr != nil && !errors.Is(sinkErr, context.Canceled):
		return sinkErr
	case end == endStopped:
		return nil
	}
	return readErr
}

// fence opens the sink's transactional producer for an exactly-once
// session on the slot st describes, which fences the older relays of the
// slot and aborts what they left open, and returns the progress they
// committed for this history of the slot, up to the server's WAL and the
// state row's ceiling. Progress past either was written by another
// database sharing the slot's incarnation (a clone, or the primary a
// restored snapshot was taken of): the state row then gets a new
// incarnation, and the sink opens again under it.
func (r *Relay) fence(ctx context.Context, sk *sink.Sink, st *slotstate.RelayState) (sink.Progress, error) {
	_, walEnd, err := slotstate.IdentifyAt(ctx, r.stage.slot)
	if err != nil {
		return sink.Progress{}, err
	}
	for attempt := 0; ; attempt++ {
		h := sink.History{SystemID: st.SystemID, Timeline: st.Timeline, SlotCreatedLSN: st.CreatedLSN, Incarnation: st.Incarnation}
		committed, err := sk.OpenExactlyOnce(ctx, h, walEnd, st.Ceiling)
		if errors.Is(err, sink.ErrForeignProgress) && attempt == 0 {
			if err = r.reincarnate(ctx, st); err == nil {
				continue
			}
		}
		if err != nil {
			sk.Close()
			return sink.Progress{}, err
		}
		return committed, nil
	}
}

// reincarnate gives the slot's state row st a new incarnation.
func (r *Relay) reincarnate(ctx context.Context, st *slotstate.RelayState) error {
	conn, err := pgconnect.Connect(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return slotstate.Reincarnate(ctx, conn, r.stage.slot, st)
}

// checkConfig is the configuration the session's checks run with: a
// standby repeats them every StandbyRetryInterval, without the warnings it
// logged at its first attempt.
func (r *Relay) checkConfig() *Config {
	if !r.live.Standby.Load() {
		return &r.cfg
	}
	quiet := r.cfg
	quiet.Logger = slog.New(slog.DiscardHandler)
	return &quiet
}

// startStream opens the replication connection, reads the liveness bound
// and starts streaming from start, within pgconnect.SessionStartTimeout: a
// connection that hangs (a blackholing network) is retried.
func startStream(ctx context.Context, c *Config, start pglogrepl.LSN) (*pgconn.PgConn, pgconnect.Liveness, error) {
	ctx, cancel := context.WithTimeout(ctx, pgconnect.SessionStartTimeout)
	defer cancel()
	conn, err := pgconnect.ConnectReplication(ctx, c.DatabaseURL)
	if err != nil {
		return nil, pgconnect.Liveness{}, err
	}
	lv, err := pgconnect.ReadLiveness(ctx, conn, c.StatusInterval)
	if err == nil {
		err = wal.StartReplication(ctx, conn, c.Slot, c.Publication, start)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, pgconnect.Liveness{}, err
	}
	return conn, lv, nil
}

// lead makes the relay the slot's leader for a session that streams from
// start with tracker tr: ready, with a fresh liveness clock.
func (r *Relay) lead(tr *acktrack.Tracker, lv pgconnect.Liveness, start pglogrepl.LSN) {
	c := &r.cfg
	r.live.Tracker.Store(tr)
	r.live.Acked(time.Now())
	r.live.Begin(time.Now(), lv.Bound)
	r.ready.Store(true)
	r.live.Leader.Store(true)
	if r.live.Standby.Swap(false) {
		c.Logger.Info("took over the slot from the process that streamed it", "slot", c.Slot)
	}
	c.Logger.Info("streaming", "database", redact.URL(c.DatabaseURL), "slot", c.Slot, "publication", c.Publication,
		"table", c.Table, "from", start.String(), "wal_sender_timeout", lv.SenderTimeout.String(), "liveness_bound", lv.Bound.String())
}

// stepDown ends the leadership lead began.
func (r *Relay) stepDown() {
	r.live.Leader.Store(false)
	r.ready.Store(false)
}

// sinkRun is a session's sink goroutine.
type sinkRun struct {
	stop context.CancelFunc // ends the sink's writes at once
	done chan error         // the sink's result
}

// runSink starts the sink on q. A failing sink ends the reader
// (stopRead) with errSinkFailed as the cause. The sink's context is not
// ctx: on a graceful stop it keeps writing what is queued (see wait).
func runSink(ctx context.Context, sk *sink.Sink, q *queue.Queue, tr *acktrack.Tracker, stopRead context.CancelCauseFunc) *sinkRun {
	sinkCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &sinkRun{stop: stop, done: make(chan error, 1)}
	go func() {
		err := sk.Run(sinkCtx, q, tr)
		sk.Close()
		if err != nil {
			stopRead(fmt.Errorf("%w: %w", errSinkFailed, err))
		}
		s.done <- err
	}()
	return s
}

// wait returns the sink's result once the reader has closed its events.
// On a graceful end it lets Kafka acknowledge what is queued, within
// c.ShutdownTimeout; otherwise it stops the sink at once.
func (s *sinkRun) wait(graceful bool, c *Config, tr *acktrack.Tracker) error {
	if !graceful {
		s.stop()
		return <-s.done
	}
	timer := time.NewTimer(c.ShutdownTimeout)
	defer timer.Stop()
	select {
	case err := <-s.done:
		return err
	case <-timer.C:
		c.Logger.Warn("shutdown timeout: abandoning unacknowledged events (they are read again after a restart)",
			"in_flight", tr.InFlight())
		s.stop()
		return <-s.done
	}
}

// ending is how a session's reader ended.
type ending int

const (
	// endBroken: the connection, the reader or the sink failed. The sink
	// stops at once; the next session replays from the confirmed position.
	endBroken ending = iota
	// endStopped: Run's context ended (whatever its cause:
	// signal.NotifyContext cancels with one) before the sink failed. The
	// sink drains, the final position is confirmed, Run returns nil.
	endStopped
	// endInvalid: an invalid event stopped the relay under InvalidStop.
	// The sink drains what came before it, that is confirmed, and Run
	// returns the *relaytype.InvalidEventError.
	endInvalid
)

// graceful reports whether the sink may drain what is queued.
func (e ending) graceful() bool { return e != endBroken }

// sessionEnd classifies the end of a session from Run's context error, the
// reader's cancellation cause and the reader's error.
func sessionEnd(runErr, readCause, readErr error) ending {
	var invalid *relaytype.InvalidEventError
	switch {
	case errors.As(readErr, &invalid):
		return endInvalid
	case runErr != nil && !errors.Is(readCause, errSinkFailed):
		return endStopped
	}
	return endBroken
}

// prepareStream checks (and creates, unless NoCreate) the publication and the
// slot, checks the slot against the relay state (a gap ends Run, or is
// recovered under OnGap backfill), checks the table's columns, arms the
// state keeper and returns the slot's confirmed position and its state row
// (from which publishedThrough tells what Kafka already has).
func (r *Relay) prepareStream(ctx context.Context, c *Config) (start pglogrepl.LSN, st *slotstate.RelayState, err error) {
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := slotstate.EnsurePublication(ctx, conn, slotConfig(c), false); err != nil {
		return 0, nil, err
	}
	start, st, err = slotstate.EnsureSlot(ctx, conn, slotConfig(c), false)
	if err != nil {
		if err := r.onGap(ctx, err); err != nil {
			return 0, nil, err
		}
		if start, st, err = slotstate.EnsureSlot(ctx, conn, slotConfig(c), false); err != nil {
			return 0, nil, err
		}
	}
	if err := slotstate.CheckTable(ctx, conn, slotConfig(c)); err != nil {
		return 0, nil, err
	}
	r.state.Start(st)
	return start, st, nil
}
