package relay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/internal/backoff"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgtls"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Relay publishes committed outbox rows to Kafka. Create one with New.
type Relay struct {
	cfg Config
	// stage is each stage's part of cfg, derived once by New.
	stage stageConfigs
	m     *relaymetrics.Metrics
	live  pgconnect.Live
	state *slotstate.Keeper
	// runCtx is Run's context: a recovery under GapBackfill runs in it,
	// not under the session start's bound (a backfill takes its time).
	runCtx  context.Context
	ready   atomic.Bool
	running atomic.Bool
	// skipOff turns skipping replays off for the rest of Run, after a
	// skip overshot (see replaySkip).
	skipOff atomic.Bool
}

// New validates cfg, fills in its defaults, registers the metrics on
// cfg.Registerer and returns a Relay. It does not connect to anything; Run
// does.
func New(cfg *Config) (*Relay, error) {
	c, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if err := c.CheckBrokers(); err != nil {
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
	r := &Relay{cfg: c, state: slotstate.NewKeeper()}
	r.live.Acked(time.Now())
	r.live.Begin(time.Now(), pgconnect.DefaultLivenessBound)
	r.m = relaymetrics.NewMetrics(c.Slot, &r.live)
	if r.stage, err = deriveStages(&r.cfg, r.m); err != nil {
		return nil, err
	}
	if err := r.m.Register(c.Registerer); err != nil {
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
	ctx = r.withHooks(ctx)
	sk := sink.NewSink(r.stage.sink, r.m)
	// A relay without a recent sign of life from its walsender writes
	// nothing more to Kafka: the server may have given the slot to
	// another relay (see docs/liveness.md). The sink checks
	// before each write call, the producer's connections before each
	// byte, and a socket write must start before the relay turns stale
	// (its deadline), so a relay frozen between the check and the write
	// sends nothing when it resumes.
	r.live.Begin(time.Now(), pgconnect.DefaultLivenessBound)
	sk.Guard = func() error { return r.live.Stale(time.Now()) }
	sk.WriteBy = func() time.Time { return r.live.LiveUntil(time.Now()) }
	// An exactly-once commit waits until the state row records its
	// progress: no session trusts progress past the row (a restored
	// snapshot of the database rolls the row back with the WAL).
	sk.Recorded = r.state.Cover

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
	g.Go(func() error { r.state.Keep(keepCtx, r.stage.slot, &r.live); return nil })
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
func (r *Relay) Ready() bool { return r.ready.Load() && r.live.Stale(time.Now()) == nil }

// Standby reports whether the relay waits as a standby: it reached the
// server, and another process streams the slot. It is false while the relay
// streams, and while it cannot reach the server at all (for a readiness
// probe that counts a healthy standby, /readyz?standby=ok).
func (r *Relay) Standby() bool { return r.live.Standby.Load() }

// replicate runs sessions, reconnecting with backoff after transient
// failures, and waiting as a standby while another process streams the
// slot. parent is Run's context: its end is a graceful stop.
func (r *Relay) replicate(ctx, parent context.Context, sk *sink.Sink) error {
	log := r.cfg.Logger
	wait := backoff.New(r.cfg.RetryBackoff, r.cfg.MaxRetryBackoff)
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
		case relayerr.IsPermanent(err):
			return err // the caller reports it (relay run prints it once)
		case parent.Err() != nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if errors.Is(err, relaytype.ErrSlotActive) {
			// Another relay streams the slot: wait for it to go, without
			// backoff (take over quickly), counting no reconnect, logging
			// once.
			if !r.live.Standby.Swap(true) {
				// After our own connection dropped, our previous walsender
				// may also hold the slot until the server notices.
				log.Info("slot busy (another relay, or our previous connection not yet gone); waiting as a standby",
					"slot", r.cfg.Slot, "retry_every", r.cfg.StandbyRetryInterval, "detail", err)
			}
			wait.Reset()
			if !backoff.Sleep(ctx, r.cfg.StandbyRetryInterval) {
				return stopped()
			}
			continue
		}
		r.live.Standby.Store(false)
		if time.Since(began) > time.Minute {
			wait.Reset()
		}
		d := wait.Next()
		log.Warn("replication interrupted; reconnecting", "error", err, "backoff", d)
		if !backoff.Sleep(ctx, d) {
			return stopped()
		}
		r.m.Reconnects.Inc()
	}
}
