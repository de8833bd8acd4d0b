package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Stream reads the replication connection: it decodes the WAL, registers
// transactions with the tracker, queues events for the sink, and sends
// standby status updates. It alone uses the connection. Build it with
// NewStream.
type Stream struct {
	cfg     Config
	metrics *relaymetrics.Metrics
	live    *pgconnect.Live
	conn    *pgconn.PgConn
	timing  pgconnect.Liveness
	dec     *decode.Decoder
	catalog *slotstate.Catalog // fences confirmation (see slotstate.Catalog)
	tracker *acktrack.Tracker
	queue   *queue.Queue
	keeper  *slotstate.Keeper // caps what may be confirmed; nil caps nothing
	skip    *replaySkip       // drops replayed transactions Kafka already has; nil drops nothing

	stop context.Context // Run's context: ends the stream
	// traceRead is the relaytrace Read hook of Run's context, or nil.
	traceRead func(msg publish.Record, commit, read time.Time)
	// staged holds the events of the current transaction not yet queued:
	// they go to the sink together at its commit (or when BatchSize of
	// them are staged, or once the first has waited Config.StageFor), so
	// a sink that is free never writes a part of a transaction the reader
	// is still reading, unless the rest is slow to come.
	staged   []decode.Event
	stagedAt time.Time // when the first of staged was staged
	inTx     bool
	// queued reports whether the current transaction queued an event
	// (exactly-once mode then ends it with a marker, see sink's
	// exactlyonce.go).
	queued bool
	tx     acktrack.TxID
	commit time.Time
	pos    publish.Position // of the current transaction's next event
	sent   pglogrepl.LSN    // last position sent to the server
	nextSS time.Time        // when the next periodic status update is due
	lastSS time.Time        // when the last status update was sent
	readAt time.Time        // when the WAL message being handled was read
}

// Config is what the WAL reader takes of relay.Config (whose fields
// document each); package relay derives it.
type Config struct {
	// BatchSize is the most events staged before they are queued.
	BatchSize int
	// StageFor is the longest staged events wait for the rest of their
	// transaction before they are queued anyway (a long decode gap inside
	// a transaction: changes to tables the publication filters); 0: no
	// bound.
	StageFor time.Duration
	// StopOnInvalid stops the stream at an invalid event (InvalidStop);
	// otherwise DeadLetters shapes its dead-letter record.
	StopOnInvalid bool
	DeadLetters   *decode.DeadLetters
	// ExactlyOnce ends each transaction's events with a marker.
	ExactlyOnce bool
	// InstanceID, when set, goes in every record's relay-instance header.
	InstanceID string
	// Logger receives the stream's logs.
	Logger *slog.Logger
}

// StreamConfig is what a Stream reads, writes and answers to.
type StreamConfig struct {
	Config  Config
	Metrics *relaymetrics.Metrics
	// Live is the relay's liveness clock: the stream tells it when the
	// server spoke and when a confirmation went out, and stops when it
	// is stale.
	Live *pgconnect.Live
	// Conn is the replication connection, streaming from Start.
	Conn  *pgconn.PgConn
	Start pglogrepl.LSN
	// Timing is the server's timing, read from Conn before streaming.
	Timing  pgconnect.Liveness
	Decoder *decode.Decoder
	// Catalog fences confirmation (see slotstate.Catalog).
	Catalog *slotstate.Catalog
	Tracker *acktrack.Tracker
	// Queue takes the events to the sink.
	Queue *queue.Queue
	// Keeper caps what may be confirmed; nil caps nothing.
	Keeper *slotstate.Keeper
	// SkipThrough is where Kafka holds every transaction of the slot that
	// ends at or before it: the replayed transactions up to it are not
	// published again (see replaySkip). At or before Start: nothing is
	// skipped.
	SkipThrough pglogrepl.LSN
	// SkipPart, when its Seq is above 0, is a transaction past SkipThrough
	// that Kafka holds in part (an exactly-once relay committed it in
	// parts): its events before SkipPart.Seq are not published again.
	SkipPart publish.Position
}

// NewStream returns the stream of one session.
func NewStream(c StreamConfig) *Stream {
	return &Stream{
		cfg: c.Config, metrics: c.Metrics, live: c.Live, conn: c.Conn, sent: c.Start, timing: c.Timing,
		dec: c.Decoder, catalog: c.Catalog, tracker: c.Tracker, queue: c.Queue, keeper: c.Keeper,
		skip: newReplaySkip(c.SkipThrough, c.SkipPart, c.Start, c.Config.Logger, c.Metrics.ReplaySkipped),
	}
}

// SkipOvershot reports whether the stream ended because a transaction it
// judged already published ended past SkipThrough: the relay then skips
// nothing for the rest of its run.
func (s *Stream) SkipOvershot() bool {
	return s.skip != nil && s.skip.overshot
}

// StartReplication starts streaming the slot from start.
func StartReplication(ctx context.Context, conn *pgconn.PgConn, slot, publication string, start pglogrepl.LSN) error {
	pub := `"` + strings.ReplaceAll(publication, `"`, `""`) + `"`
	err := pglogrepl.StartReplication(ctx, conn, slot, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + strings.ReplaceAll(pub, `'`, `''`) + "'",
			"messages 'true'",
		},
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use: another process streams the slot
		return fmt.Errorf("%w: %s", relaytype.ErrSlotActive, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("relay: start replication of slot %s: %w", slot, err)
	}
	return nil
}

// Run reads until ctx ends (it returns its cause) or the connection
// fails, or the server falls silent for longer than the liveness bound.
// Once it returns, the replay skip is over (what it skipped is logged).
//
// Reads take no context: pgconn would watch one for every message (a
// callback registered and removed each time). A read deadline on the
// socket bounds each round of reading instead, and the end of ctx moves
// it to now.
func (s *Stream) Run(ctx context.Context) error {
	s.stop = ctx
	if h := relaytrace.FromContext(ctx); h != nil {
		s.traceRead = h.Read
	}
	defer s.skip.done()
	nc := s.conn.Conn()
	var (
		mu   sync.Mutex
		done bool // run returned: the socket's deadline is no longer its
	)
	unwatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = nc.SetReadDeadline(time.Now())
		}
	})
	defer func() {
		unwatch()
		mu.Lock()
		done = true
		mu.Unlock()
		_ = nc.SetReadDeadline(time.Time{})
	}()
	s.nextSS = time.Now().Add(s.timing.StatusEvery)
	for {
		if err := nc.SetReadDeadline(s.wake()); err != nil {
			return fmt.Errorf("relay: replication connection: %w", err)
		}
		// After the deadline is set: a stop from now on moves it.
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		err := s.readUntilDeadline()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			return err
		}
		now := time.Now()
		if err := s.live.Stale(now); err != nil {
			return err
		}
		if s.stageDue(now) {
			if err := s.flush(); err != nil {
				return err
			}
		}
		if s.statusDue(time.Now()) {
			if err := s.SendStandbyStatus(); err != nil {
				return err
			}
		}
	}
}

// stageDue reports whether the staged events have waited StageFor for the
// rest of their transaction: they are then queued without it.
func (s *Stream) stageDue(now time.Time) bool {
	return len(s.staged) > 0 && s.cfg.StageFor > 0 && !now.Before(s.stagedAt.Add(s.cfg.StageFor))
}

// confirmable is the position a status update may confirm: what Kafka
// acknowledged, never past the catalog fence (see slotstate.Catalog) nor
// the state's ceiling (see slotstate.Keeper).
func (s *Stream) confirmable() pglogrepl.LSN {
	return s.keeper.Cap(s.catalog.Fenced(s.tracker.Confirmed()))
}

// wake is when the reader next stops reading to check for a status update:
// when the periodic one is due, or, while Kafka may acknowledge events,
// pgconnect.PromptStatusGap after the last one, so a confirmation goes out promptly
// (a crash then replays only what was in flight); and to queue staged
// events once they have waited StageFor.
func (s *Stream) wake() time.Time {
	at := s.nextSS
	switch {
	case s.confirmable() != s.sent:
		at = minTime(at, s.lastSS.Add(pgconnect.PromptStatusGap))
	case s.tracker.InFlight() > 0:
		at = minTime(at, time.Now().Add(pgconnect.PromptStatusGap))
	}
	if len(s.staged) > 0 && s.cfg.StageFor > 0 {
		at = minTime(at, s.stagedAt.Add(s.cfg.StageFor))
	}
	return at
}

// statusDue reports whether a status update is due at now: the periodic
// one, or a prompt one for a position that advanced.
func (s *Stream) statusDue(now time.Time) bool {
	return !now.Before(s.nextSS) ||
		s.confirmable() != s.sent && !now.Before(s.lastSS.Add(pgconnect.PromptStatusGap))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// readUntilDeadline handles messages until the socket's read deadline
// passes (it returns nil) or an error.
func (s *Stream) readUntilDeadline() error {
	for {
		raw, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) {
				return nil
			}
			return fmt.Errorf("relay: replication connection: %w", err)
		}
		switch msg := raw.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				return fmt.Errorf("%w: empty CopyData", decode.ErrProtocol)
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("%w: %w", decode.ErrProtocol, err)
				}
				now := time.Now()
				s.live.Heard(s.timing.HeardAt(ka.ServerTime, now), now)
				if !s.inTx {
					s.skip.passed(ka.ServerWALEnd)
					s.tracker.AdvanceIdle(uint64(ka.ServerWALEnd))
				}
				if ka.ReplyRequested {
					if err := s.SendStandbyStatus(); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("%w: %w", decode.ErrProtocol, err)
				}
				// Data sent before a freeze longer than the bound (read
				// from the socket buffer after it) is not published: the
				// slot may belong to another relay by now.
				now := time.Now()
				s.live.Heard(s.timing.HeardAt(xld.ServerTime, now), now)
				if err := s.live.Stale(now); err != nil {
					return err
				}
				s.readAt = now
				if err := s.handle(xld.WALData); err != nil {
					return err
				}
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("relay: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return fmt.Errorf("relay: the server ended the replication stream")
		default:
			// Notices and the like.
		}
		if now := time.Now(); s.statusDue(now) || s.stageDue(now) {
			return nil
		}
	}
}

// handle applies one pgoutput message.
func (s *Stream) handle(data []byte) error {
	it, err := s.dec.Decode(data)
	if err != nil {
		if errors.Is(err, relaytype.ErrTableColumns) {
			return relayerr.Permanent(err)
		}
		return err
	}
	switch it.Kind {
	case decode.WALBegin:
		if s.inTx {
			return fmt.Errorf("%w: begin inside a transaction", decode.ErrProtocol)
		}
		s.inTx, s.queued, s.tx, s.commit = true, false, s.tracker.BeginAt(it.CommitTime), it.CommitTime
		s.pos = publish.Position{Final: it.FinalLSN}
		// A skipped transaction stays registered, without events: it
		// completes in commit order and confirmation passes it.
		s.skip.begin(s.pos.Final)
	case decode.WALCommit:
		if !s.inTx {
			return fmt.Errorf("%w: commit outside a transaction", decode.ErrProtocol)
		}
		s.inTx = false
		if err := s.skip.commit(it.EndLSN); err != nil {
			return err // the transaction stays unsealed: never confirmed
		}
		s.keeper.Read(it.EndLSN, s.dec.Messages)
		s.catalog.Read(it.EndLSN)
		if s.cfg.ExactlyOnce && s.queued {
			s.staged = append(s.staged, decode.Event{Marker: true, Tx: s.tx, Commit: s.commit, EndLSN: uint64(it.EndLSN)})
		}
		s.tracker.Commit(s.tx, uint64(it.EndLSN))
		return s.flush()
	case decode.WALEvent:
		if !s.inTx {
			return fmt.Errorf("%w: event outside a transaction", decode.ErrProtocol)
		}
		pos := s.pos
		s.pos.Seq++
		if s.skip.skipping() {
			return nil // Kafka has it (dead-lettered if it was invalid)
		}
		ev := it.Event
		ev.Record.Pos = pos
		if ev.Invalid != nil {
			if s.cfg.StopOnInvalid {
				s.metrics.Invalid.WithLabelValues(ev.Invalid.Reason).Inc()
				return relayerr.Permanent(ev.Invalid)
			}
			s.cfg.DeadLetters.Shape(&ev)
		}
		ev.Tx, ev.Commit = s.tx, s.commit
		if s.traceRead != nil {
			s.traceRead(ev.Record, s.commit, s.readAt)
		}
		s.tracker.Add(s.tx, 1)
		s.queued = true
		return s.stage(ev)
	}
	return nil
}

// stage adds ev to the staged events once the buffer budget has room for
// it, queueing them for the sink when BatchSize are staged. While it waits
// for the budget (having queued what was staged: the sink gives the budget
// back only for events it has), it keeps sending status updates, so the
// server does not time the connection out while Kafka is slow.
func (s *Stream) stage(ev decode.Event) error {
	if s.cfg.InstanceID != "" {
		ev.Record.Headers = append(ev.Record.Headers, publish.Header{Key: contract.HeaderRelayInstance, Value: []byte(s.cfg.InstanceID)})
	}
	ev.Cost = s.queue.Budget.Cost(&ev)
	if !s.queue.Budget.TryTake(ev.Cost) {
		if err := s.flush(); err != nil {
			return err
		}
		if err := s.waitSendingStatus(func(ctx context.Context) error { return s.queue.Budget.Take(ctx, ev.Cost) }); err != nil {
			return err
		}
	}
	if s.staged == nil {
		select {
		case s.staged = <-s.queue.Free:
		default:
			s.staged = make([]decode.Event, 0, 8)
		}
	}
	if len(s.staged) == 0 {
		s.stagedAt = s.readAt
	}
	s.staged = append(s.staged, ev)
	if len(s.staged) >= s.cfg.BatchSize {
		return s.flush()
	}
	return nil
}

// flush queues the staged events for the sink, waiting (and sending status
// updates, as stage does) while the queue holds BatchSize events.
func (s *Stream) flush() error {
	if len(s.staged) == 0 {
		return nil
	}
	evs := s.staged
	s.staged = nil
	if n := int64(len(evs)); !s.queue.Room.TryAcquire(n) {
		if err := s.waitSendingStatus(func(ctx context.Context) error { return s.queue.Room.Acquire(ctx, n) }); err != nil {
			return err
		}
	}
	select {
	case s.queue.Events <- evs:
		return nil
	default:
	}
	return s.waitSendingStatus(func(ctx context.Context) error {
		select {
		case s.queue.Events <- evs:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// waitSendingStatus calls wait with a context that ends when the next
// status update may be due, and sends it when it is, until wait succeeds
// or the stream stops.
func (s *Stream) waitSendingStatus(wait func(context.Context) error) error {
	for {
		ctx, cancel := context.WithDeadline(s.stop, s.wake())
		err := wait(ctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case s.stop.Err() != nil:
			return context.Cause(s.stop)
		}
		if err := s.live.Stale(time.Now()); err != nil {
			return err
		}
		if !s.statusDue(time.Now()) {
			continue
		}
		if err := s.SendStandbyStatus(); err != nil {
			return err
		}
		// The reader is not reading: the status update it just sent
		// (which keeps the walsender alive) is its sign of life.
		s.live.Vouch(time.Now())
	}
}

// SendStandbyStatus confirms the tracker's position, with write, flush and apply
// positions all set explicitly.
func (s *Stream) SendStandbyStatus() error {
	if s.conn.IsClosed() {
		// A failed read closed it: pgconn sends Terminate from a goroutine
		// of its own, and writing beside it would race on the connection's
		// buffer.
		return fmt.Errorf("relay: send standby status: %w", net.ErrClosed)
	}
	pos := s.confirmable()
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos,
		WALFlushPosition: pos,
		WALApplyPosition: pos,
		ClientTime:       time.Now(),
		ReplyRequested:   true, // the reply is the server's sign of life
	})
	if err != nil {
		return fmt.Errorf("relay: send standby status: %w", err)
	}
	if pos != s.sent {
		s.cfg.Logger.Debug("confirmed WAL position", "lsn", pos.String())
	}
	if pos != s.sent || s.tracker.Idle() {
		s.live.Acked(time.Now())
	}
	s.sent = pos
	s.lastSS = time.Now()
	s.nextSS = s.lastSS.Add(s.timing.StatusEvery)
	s.metrics.ConfirmedLSN.Set(float64(pos))
	s.metrics.InFlight.Set(float64(s.tracker.InFlight()))
	return s.catalog.Failure()
}
