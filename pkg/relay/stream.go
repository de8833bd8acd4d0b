package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
)

// stream reads the replication connection: it decodes the WAL, registers
// transactions with the tracker, queues events for the sink, and sends
// standby status updates. It alone uses conn.
type stream struct {
	cfg  *Config
	m    *metrics
	live *live
	conn *pgconn.PgConn
	dec  *decoder
	cat  *catalog // fences confirmation (see catalog)
	tr   *acktrack.Tracker
	q    *queue
	// staged holds the events of the current transaction not yet queued:
	// they go to the sink together at its commit (or when BatchSize of
	// them are staged), so a sink that is free never writes a part of a
	// transaction the reader is still reading.
	staged []event
	stop   context.Context // ends the stream (Run's context, or a failure)
	inTx   bool
	// queued reports whether the current transaction queued an event
	// (exactly-once mode then ends it with a marker, see exactlyonce.go).
	queued bool
	tx     acktrack.TxID
	commit time.Time
	sent   pglogrepl.LSN // last position sent to the server
	nextSS time.Time     // when the next periodic status update is due
	lv     liveness
	lastSS time.Time   // when the last status update was sent
	state  *keeper     // caps what may be confirmed (see keeper); nil caps nothing
	readAt time.Time   // when the WAL message being handled was read
	skip   *replaySkip // drops replayed transactions Kafka already has; nil drops nothing
}

// startReplication starts streaming the slot from start.
func startReplication(ctx context.Context, conn *pgconn.PgConn, c *Config, start pglogrepl.LSN) error {
	pub := `"` + strings.ReplaceAll(c.Publication, `"`, `""`) + `"`
	err := pglogrepl.StartReplication(ctx, conn, c.Slot, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + strings.ReplaceAll(pub, `'`, `''`) + "'",
			"messages 'true'",
		},
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use: another process streams the slot
		return fmt.Errorf("%w: %s", ErrSlotActive, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("relay: start replication of slot %s: %w", c.Slot, err)
	}
	return nil
}

// run reads until s.stop ends (it returns its cause) or the connection
// fails, or the server falls silent for longer than the liveness bound.
//
// Reads take no context: pgconn would watch one for every message (a
// callback registered and removed each time). A read deadline on the
// socket bounds each round of reading instead, and the end of s.stop moves
// it to now.
func (s *stream) run() error {
	ctx := s.stop
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
	s.nextSS = time.Now().Add(s.lv.statusEvery)
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
		if err := s.live.stale(time.Now()); err != nil {
			return err
		}
		if s.statusDue() {
			if err := s.sendStandbyStatus(); err != nil {
				return err
			}
		}
	}
}

// confirmable is the position a status update may confirm: what Kafka
// acknowledged, never past the catalog fence (see catalog) nor the state's
// ceiling (see keeper).
func (s *stream) confirmable() pglogrepl.LSN {
	return s.state.cap(s.cat.fenced(s.tr.Confirmed()))
}

// wake is when the reader next stops reading to check for a status update:
// when the periodic one is due, or, while Kafka may acknowledge events,
// promptStatusGap after the last one, so a confirmation goes out promptly
// (a crash then replays only what was in flight).
func (s *stream) wake() time.Time {
	switch {
	case s.confirmable() != s.sent:
		return minTime(s.nextSS, s.lastSS.Add(promptStatusGap))
	case s.tr.InFlight() > 0:
		return minTime(s.nextSS, time.Now().Add(promptStatusGap))
	}
	return s.nextSS
}

// statusDue reports whether a status update is due: the periodic one, or
// a prompt one for a position that advanced.
func (s *stream) statusDue() bool {
	now := time.Now()
	return !now.Before(s.nextSS) ||
		s.confirmable() != s.sent && !now.Before(s.lastSS.Add(promptStatusGap))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// readUntilDeadline handles messages until the socket's read deadline
// passes (it returns nil) or an error.
func (s *stream) readUntilDeadline() error {
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
				return fmt.Errorf("%w: empty CopyData", errProtocol)
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("%w: %w", errProtocol, err)
				}
				now := time.Now()
				s.live.heard(s.lv.heardAt(ka.ServerTime, now), now)
				if !s.inTx {
					s.skip.passed(ka.ServerWALEnd)
					s.tr.AdvanceIdle(uint64(ka.ServerWALEnd))
				}
				if ka.ReplyRequested {
					if err := s.sendStandbyStatus(); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("%w: %w", errProtocol, err)
				}
				// Data sent before a freeze longer than the bound (read
				// from the socket buffer after it) is not published: the
				// slot may belong to another relay by now.
				now := time.Now()
				s.live.heard(s.lv.heardAt(xld.ServerTime, now), now)
				if err := s.live.stale(now); err != nil {
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
		if s.statusDue() {
			return nil
		}
	}
}

// handle applies one pgoutput message.
func (s *stream) handle(data []byte) error {
	it, err := s.dec.decode(data)
	if err != nil {
		if errors.Is(err, ErrTableColumns) {
			return permanent(err)
		}
		return err
	}
	switch it.kind {
	case walBegin:
		if s.inTx {
			return fmt.Errorf("%w: begin inside a transaction", errProtocol)
		}
		s.inTx, s.queued, s.tx, s.commit = true, false, s.tr.BeginAt(it.commitTime), it.commitTime
		// A skipped transaction stays registered, without events: it
		// completes in commit order and confirmation passes it.
		s.skip.begin(beginFinalLSN(data))
	case walCommit:
		if !s.inTx {
			return fmt.Errorf("%w: commit outside a transaction", errProtocol)
		}
		s.inTx = false
		if err := s.skip.commit(it.endLSN); err != nil {
			return err // the transaction stays unsealed: never confirmed
		}
		s.state.read(it.endLSN, s.dec.messages)
		if s.cfg.ExactlyOnce && s.queued {
			s.staged = append(s.staged, event{marker: true, tx: s.tx, commit: s.commit, endLSN: uint64(it.endLSN)})
		}
		s.tr.Commit(s.tx, uint64(it.endLSN))
		return s.flush()
	case walEvent:
		if !s.inTx {
			return fmt.Errorf("%w: event outside a transaction", errProtocol)
		}
		if s.skip.skipping() {
			return nil // Kafka has it (dead-lettered if it was invalid)
		}
		ev := it.ev
		if ev.invalid != nil {
			if s.cfg.OnInvalid == InvalidStop {
				s.m.invalid.WithLabelValues(ev.invalid.Reason).Inc()
				return permanent(ev.invalid)
			}
			deadLetter(s.cfg, s.m, &ev)
		}
		ev.tx, ev.commit = s.tx, s.commit
		if relaytrace.Read != nil {
			relaytrace.Read(ev.msg, s.commit, s.readAt)
		}
		s.tr.Add(s.tx, 1)
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
func (s *stream) stage(ev event) error {
	if s.cfg.InstanceID != "" {
		ev.msg.Headers = append(ev.msg.Headers, kgo.RecordHeader{Key: InstanceHeader, Value: []byte(s.cfg.InstanceID)})
	}
	ev.cost = s.q.buf.cost(&ev)
	if !s.q.buf.tryTake(ev.cost) {
		if err := s.flush(); err != nil {
			return err
		}
		if err := s.waitSendingStatus(func(ctx context.Context) error { return s.q.buf.take(ctx, ev.cost) }); err != nil {
			return err
		}
	}
	if s.staged == nil {
		select {
		case s.staged = <-s.q.free:
		default:
			s.staged = make([]event, 0, 8)
		}
	}
	s.staged = append(s.staged, ev)
	if len(s.staged) >= s.cfg.BatchSize {
		return s.flush()
	}
	return nil
}

// flush queues the staged events for the sink, waiting (and sending status
// updates, as stage does) while the queue holds BatchSize events.
func (s *stream) flush() error {
	if len(s.staged) == 0 {
		return nil
	}
	evs := s.staged
	s.staged = nil
	if n := int64(len(evs)); !s.q.room.TryAcquire(n) {
		if err := s.waitSendingStatus(func(ctx context.Context) error { return s.q.room.Acquire(ctx, n) }); err != nil {
			return err
		}
	}
	select {
	case s.q.events <- evs:
		return nil
	default:
	}
	return s.waitSendingStatus(func(ctx context.Context) error {
		select {
		case s.q.events <- evs:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// waitSendingStatus calls wait with a context that ends when the next
// status update may be due, and sends it when it is, until wait succeeds
// or the stream stops.
func (s *stream) waitSendingStatus(wait func(context.Context) error) error {
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
		if err := s.live.stale(time.Now()); err != nil {
			return err
		}
		if !s.statusDue() {
			continue
		}
		if err := s.sendStandbyStatus(); err != nil {
			return err
		}
		// The reader is not reading: the status update it just sent
		// (which keeps the walsender alive) is its sign of life.
		s.live.vouch(time.Now())
	}
}

// sendStandbyStatus confirms the tracker's position, with write, flush and apply
// positions all set explicitly.
func (s *stream) sendStandbyStatus() error {
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
	if pos != s.sent || s.tr.Idle() {
		s.live.acked(time.Now())
	}
	s.sent = pos
	s.lastSS = time.Now()
	s.nextSS = s.lastSS.Add(s.lv.statusEvery)
	s.m.confirmedLSN.Set(float64(pos))
	s.m.inFlight.Set(float64(s.tr.InFlight()))
	return s.cat.failure()
}
