package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
)

// errSinkFailed is the cause with which a failing sink ends the reader.
var errSinkFailed = errors.New("relay: kafka writer failed")

// session streams the slot over one replication connection. Everything in
// memory (queue, tracker) lives and dies with it; the next session resumes
// from the slot's confirmed position.
func (r *Relay) session(ctx context.Context, sk *sink) error {
	c := &r.cfg
	pc := c
	if r.live.standby.Load() {
		// A standby repeats the checks every StandbyRetryInterval; their
		// warnings were logged at its first attempt.
		quiet := *c
		quiet.Logger = slog.New(slog.DiscardHandler)
		pc = &quiet
	}
	start, err := r.prepareStream(ctx, pc) // unbounded: it may recover a gap
	if err != nil {
		return err
	}
	// A replication connection that hangs (a blackholing network) is
	// retried.
	startCtx, cancelStart := context.WithTimeout(ctx, sessionStartTimeout)
	defer cancelStart()
	conn, err := connectReplication(startCtx, c)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	lv, err := readLiveness(startCtx, conn, c.StatusInterval)
	if err != nil {
		return err
	}
	if err := startReplication(startCtx, conn, c, start); err != nil {
		return err
	}
	cancelStart()
	cat, err := openCatalog(ctx, c)
	if err != nil {
		return err
	}
	defer cat.close()
	cat.watch()
	tr := acktrack.New(uint64(start))
	r.live.tracker.Store(tr)
	r.live.acked(time.Now())
	r.live.begin(time.Now(), lv.bound)
	r.ready.Store(true)
	r.live.leader.Store(true)
	defer func() {
		r.live.leader.Store(false)
		r.ready.Store(false)
	}()
	if r.live.standby.Swap(false) {
		c.Logger.Info("took over the slot from the process that streamed it", "slot", c.Slot)
	}
	c.Logger.Info("streaming", "database", RedactURL(c.DatabaseURL), "slot", c.Slot, "publication", c.Publication,
		"table", c.Table, "from", start.String(), "wal_sender_timeout", lv.senderTimeout.String(), "liveness_bound", lv.bound.String())

	events := make(chan event, c.BatchSize)
	buf := newBudget(c.BufferBytes, r.m.bufferBytes)
	// Events still queued when the session ends are dropped with it.
	defer r.m.bufferBytes.Set(0)
	readCtx, stopRead := context.WithCancelCause(ctx)
	defer stopRead(nil)
	sinkCtx, stopSink := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSink()
	sinkDone := make(chan error, 1)
	go func() {
		err := sk.run(sinkCtx, events, buf, tr)
		if err != nil {
			stopRead(fmt.Errorf("%w: %w", errSinkFailed, err))
		}
		sinkDone <- err
	}()

	st := &stream{cfg: c, m: r.m, live: &r.live, conn: conn, sent: start, dec: newDecoder(c, cat), cat: cat, tr: tr, events: events, buf: buf, stop: readCtx, lv: lv, state: r.state}
	readErr := st.run()
	close(events)

	// A stop is graceful when Run's context ended (whatever its cause:
	// signal.NotifyContext cancels with one) before the sink failed, or
	// when an invalid event stops the relay under InvalidStop.
	var stopErr *InvalidEventError
	graceful := ctx.Err() != nil && !errors.Is(context.Cause(readCtx), errSinkFailed) || errors.As(readErr, &stopErr)
	var sinkErr error
	if graceful {
		// Let Kafka acknowledge what is queued, within bounds.
		timer := time.NewTimer(c.ShutdownTimeout)
		select {
		case sinkErr = <-sinkDone:
		case <-timer.C:
			c.Logger.Warn("shutdown timeout: abandoning unacknowledged events (they are read again after a restart)",
				"in_flight", tr.InFlight())
			stopSink()
			sinkErr = <-sinkDone
		}
		timer.Stop()
	} else {
		stopSink()
		sinkErr = <-sinkDone
	}
	// Confirm what Kafka acknowledged; on a broken connection this fails
	// harmlessly.
	cat.recheck()
	if err := st.sendStandbyStatus(); err == nil && graceful {
		c.Logger.Info("stopped", "confirmed_lsn", pglogrepl.LSN(tr.Confirmed()).String())
	}
	if sinkErr != nil && !errors.Is(sinkErr, context.Canceled) {
		return sinkErr
	}
	if graceful && stopErr == nil {
		return nil
	}
	return readErr
}

// prepareStream checks (and creates, unless NoCreate) the publication and the
// slot, checks the slot against the relay state (a gap ends Run, or is
// recovered under OnGap backfill), checks the table's columns, arms the
// state keeper and returns the slot's confirmed position.
func (r *Relay) prepareStream(ctx context.Context, c *Config) (pglogrepl.LSN, error) {
	conn, err := connect(ctx, c)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := ensurePublication(ctx, conn, c, false); err != nil {
		return 0, err
	}
	start, st, err := ensureSlot(ctx, conn, c)
	if err != nil {
		if err := r.onGap(ctx, err); err != nil {
			return 0, err
		}
		if start, st, err = ensureSlot(ctx, conn, c); err != nil {
			return 0, err
		}
	}
	if err := checkTable(ctx, conn, c); err != nil {
		return 0, err
	}
	r.state.start(st)
	return start, nil
}
