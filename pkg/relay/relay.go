package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/pgtls"
)

// Relay publishes committed outbox rows to Kafka. Create one with New.
type Relay struct {
	cfg   Config
	m     *metrics
	live  live
	state *keeper
	// runCtx is Run's context: a recovery under GapBackfill runs in it,
	// not under the session start's bound (a backfill takes its time).
	runCtx  context.Context
	ready   atomic.Bool
	running atomic.Bool
}

// New validates cfg, fills in its defaults, registers the metrics on
// cfg.Registerer and returns a Relay. It does not connect to anything; Run
// does.
func New(cfg *Config) (*Relay, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := c.needBrokers(); err != nil {
		return nil, err
	}
	if c.BufferBytes < c.MaxMessageBytes {
		c.Logger.Warn("buffer bytes below max message bytes: a record larger than the buffer is sent alone, without batching",
			"buffer_bytes", c.BufferBytes, "max_message_bytes", c.MaxMessageBytes)
	}
	if ws, err := pgtls.Check(c.DatabaseURL); err == nil && len(ws) > 0 {
		c.Logger.Warn("the database connection is not verified TLS: the replication stream carries every payload; use sslmode=verify-full, or RequireTLS (--require-tls) to refuse",
			"hosts", pgtls.Describe(ws))
	}
	r := &Relay{cfg: c, state: newKeeper()}
	r.live.acked(time.Now())
	r.live.begin(time.Now(), defaultLivenessBound)
	r.m = newMetrics(c.Slot, &r.live)
	if err := r.m.register(c.Registerer); err != nil {
		return nil, fmt.Errorf("relay: register metrics: %w", err)
	}
	return r, nil
}

// Run streams the outbox until ctx is cancelled, then flushes what is in
// flight, confirms the final position and returns nil. Permanent errors (bad
// configuration, missing privileges, slot gone) end Run with an error naming
// the cause; transient ones are retried with backoff. Run may be called
// once at a time.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("relay: Run is already running")
	}
	defer r.running.Store(false)
	sk := newSink(&r.cfg, r.m)
	defer func() { _ = sk.close() }()
	// A relay without a recent sign of life from its walsender writes
	// nothing more to Kafka: the server may have given the slot to
	// another relay (see Liveness in the package doc). The sink checks
	// before each write call, the connections before each byte.
	r.live.begin(time.Now(), defaultLivenessBound)
	sk.guard = func() error { return r.live.stale(time.Now()) }
	sk.transport.Dial = guardedDial(sk.guard)

	g, gctx := errgroup.WithContext(ctx)
	r.runCtx = gctx
	if r.cfg.PruneAfter > 0 {
		g.Go(func() error { r.prune(gctx); return nil })
	}
	if r.cfg.HeartbeatInterval > 0 {
		g.Go(func() error { r.heartbeat(gctx); return nil })
	}
	g.Go(func() error { r.pollSlot(gctx); return nil })
	// The state keeper outlives the sessions, so that a graceful stop's
	// final confirmation is not held back by a ceiling it could not raise.
	keepCtx, stopKeep := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { r.keepState(keepCtx); return nil })
	g.Go(func() error {
		defer stopKeep()
		return r.replicate(gctx, ctx, sk)
	})
	return g.Wait()
}

// Ready reports whether the relay is connected and streaming (for /readyz).
// It is false while the relay waits as a standby, and while its walsender
// has given no sign of life for longer than the liveness bound (see
// Liveness in the package doc).
func (r *Relay) Ready() bool { return r.ready.Load() && r.live.stale(time.Now()) == nil }

// replicate runs sessions, reconnecting with backoff after transient
// failures, and waiting as a standby while another process streams the
// slot. parent is Run's context: its end is a graceful stop.
func (r *Relay) replicate(ctx, parent context.Context, sk *sink) error {
	log := r.cfg.Logger
	backoff := r.cfg.RetryBackoff
	stopped := func() error {
		if parent.Err() != nil {
			return nil
		}
		return ctx.Err()
	}
	for {
		began := time.Now()
		err := r.session(ctx, sk)
		switch {
		case Permanent(err):
			return err // the caller reports it (relay run prints it once)
		case parent.Err() != nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if errors.Is(err, ErrSlotActive) {
			// Another relay streams the slot: wait for it to go, without
			// backoff (take over quickly), counting no reconnect, logging
			// once.
			if !r.live.standby.Swap(true) {
				// After our own connection dropped, our previous walsender
				// may also hold the slot until the server notices.
				log.Info("slot busy (another relay, or our previous connection not yet gone); waiting as a standby",
					"slot", r.cfg.Slot, "retry_every", r.cfg.StandbyRetryInterval, "detail", err)
			}
			backoff = r.cfg.RetryBackoff
			if !sleep(ctx, r.cfg.StandbyRetryInterval) {
				return stopped()
			}
			continue
		}
		r.live.standby.Store(false)
		if time.Since(began) > time.Minute {
			backoff = r.cfg.RetryBackoff
		}
		log.Warn("replication interrupted; reconnecting", "error", err, "backoff", backoff)
		if !sleep(ctx, backoff) {
			return stopped()
		}
		backoff = min(2*backoff, r.cfg.MaxRetryBackoff)
		r.m.reconnects.Inc()
	}
}

// sleep waits for d; it returns false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

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
