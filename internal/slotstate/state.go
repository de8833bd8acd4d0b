package slotstate

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/backoff"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// StateTable is the state table of c's outbox.
func StateTable(c *Config) pgname.Table {
	t, _ := pgname.Parse(c.Table, "public")
	return pgname.Table{Schema: t.Schema, Name: relaytype.StateTableName}
}

// ServerIdentity is the server as IDENTIFY_SYSTEM describes it.
type ServerIdentity struct {
	SystemID string
	Timeline int32
}

// RelayState is the slot's row of the state table.
type RelayState struct {
	ServerIdentity
	CreatedLSN   pglogrepl.LSN
	CreatedAt    time.Time
	ConfirmedLSN pglogrepl.LSN
	ConfirmedAt  *time.Time // commit time of the last confirmed transaction; nil before the first
	Ceiling      pglogrepl.LSN
	// Incarnation is the random identity made with the slot (see
	// Reincarnate): part of the exactly-once progress key and
	// transactional ID. Empty only in a row of before incarnations, to
	// which EnsureSlot gives one.
	Incarnation  string
	MessagesSeen bool
	PrunedBefore *time.Time
	UpdatedAt    time.Time
	// Resumable is set by EnsureSlot when the slot resumes with no gap on
	// the server the row describes (same system identifier and
	// timeline): only then does ConfirmedLSN say what Kafka holds of the
	// WAL the session replays (see package relay's publishedThrough).
	Resumable bool
}

// Since is the commit time from which events may be missing after a gap:
// the last confirmed commit time, or the slot's creation when nothing was
// confirmed yet.
func (st *RelayState) Since() time.Time {
	if st.ConfirmedAt != nil {
		return *st.ConfirmedAt
	}
	return st.CreatedAt
}

// ReadState returns the slot's state row, nil when there is none. A missing
// state table is an error wrapping ErrStateMissing.
func ReadState(ctx context.Context, conn *pgx.Conn, c *Config) (*RelayState, error) {
	var (
		st                          RelayState
		created, confirmed, ceiling string
		confirmedAt, prunedBefore   *time.Time
		systemID                    string
		timeline                    int32
		createdAt, updatedAt        time.Time
		messagesSeen                bool
	)
	// The incarnation through to_jsonb: a table of before migration 004
	// has no such column (status reads it as it is).
	err := conn.QueryRow(ctx, `SELECT system_identifier, timeline, slot_created_lsn::text, slot_created_at,
		confirmed_lsn::text, confirmed_commit_time, ceiling_lsn::text, coalesce(to_jsonb(s) ->> 'incarnation', ''),
		messages_seen, pruned_before, updated_at
		FROM `+StateTable(c).Sanitize()+` AS s WHERE slot_name = $1`, c.Slot).
		Scan(&systemID, &timeline, &created, &createdAt, &confirmed, &confirmedAt, &ceiling, &st.Incarnation, &messagesSeen, &prunedBefore, &updatedAt)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return nil, fmt.Errorf("%w: %s (run relay setup, or outbox.Migrate)", relaytype.ErrStateMissing, StateTable(c))
	case err != nil:
		return nil, fmt.Errorf("relay: read state of slot %s: %w", c.Slot, err)
	}
	st.ServerIdentity = ServerIdentity{systemID, timeline}
	st.CreatedAt, st.ConfirmedAt, st.MessagesSeen, st.PrunedBefore, st.UpdatedAt = createdAt, confirmedAt, messagesSeen, prunedBefore, updatedAt
	for _, p := range []struct {
		text string
		dst  *pglogrepl.LSN
	}{{created, &st.CreatedLSN}, {confirmed, &st.ConfirmedLSN}, {ceiling, &st.Ceiling}} {
		if *p.dst, err = pglogrepl.ParseLSN(p.text); err != nil {
			return nil, fmt.Errorf("relay: state of slot %s: %w", c.Slot, err)
		}
	}
	return &st, nil
}

// ensureStateTable creates the state table by migrating the outbox when it
// is missing, or lacks the incarnation column, and creation is allowed (an
// outbox set up before migration 002, or 004).
func ensureStateTable(ctx context.Context, conn *pgx.Conn, c *Config) error {
	var exists, current bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'incarnation' AND NOT attisdropped)`,
		StateTable(c).Sanitize()).Scan(&exists, &current); err != nil {
		return fmt.Errorf("relay: look up %s: %w", StateTable(c), err)
	}
	switch {
	case current:
		return nil
	case exists && c.NoCreate:
		return fmt.Errorf("%w: %s has no incarnation column (run relay setup, or outbox.Migrate)", relaytype.ErrStateMissing, StateTable(c))
	case c.NoCreate:
		return fmt.Errorf("%w: %s (run relay setup, or outbox.Migrate)", relaytype.ErrStateMissing, StateTable(c))
	}
	var err error
	if tableformat.Shape(c.TableFormat).CreatesTable {
		_, err = migrate.Outbox(ctx, dbdriver.PgxDB(conn), c.Table)
	} else {
		err = migrate.RelayState(ctx, dbdriver.PgxDB(conn), c.Table)
	}
	if err != nil {
		return fmt.Errorf("relay: create %s: %w", StateTable(c), err)
	}
	if exists {
		c.Logger.Info("added the incarnation column to the relay state table", "table", StateTable(c).String())
	} else {
		c.Logger.Info("created the relay state table", "table", StateTable(c).String())
	}
	return nil
}

// WriteNewState records a slot just created (by setup, a first start or a
// recovery), replacing any older row of the slot, with a new incarnation.
// The ceiling starts at the slot's consistent point, which is its
// confirmed position.
func WriteNewState(ctx context.Context, conn *pgx.Conn, c *Config, ns NewSlot, confirmedAt *time.Time) error {
	_, err := conn.Exec(ctx, `INSERT INTO `+StateTable(c).Sanitize()+` AS s
		(slot_name, system_identifier, timeline, slot_created_lsn, slot_created_at, confirmed_lsn, confirmed_commit_time, ceiling_lsn, incarnation)
		VALUES ($1, $2, $3, $4::pg_lsn, $5, $4::pg_lsn, $6, $4::pg_lsn, $7)
		ON CONFLICT (slot_name) DO UPDATE SET system_identifier = $2, timeline = $3, slot_created_lsn = $4::pg_lsn,
			slot_created_at = $5, confirmed_lsn = $4::pg_lsn, confirmed_commit_time = $6, ceiling_lsn = $4::pg_lsn,
			incarnation = $7, messages_seen = false, updated_at = now()`,
		c.Slot, ns.id.SystemID, ns.id.Timeline, ns.Consistent.String(), ns.At, confirmedAt, rand.Text())
	if err != nil {
		return fmt.Errorf("relay: record state of slot %s: %w", c.Slot, err)
	}
	return nil
}

// Reincarnate gives the slot's state row st a new incarnation, replacing
// st.Incarnation (the row is left alone when another process changed it
// meanwhile: st then takes the row's). An exactly-once session calls it
// when it finds progress under its key that this database never recorded:
// another database with the same system identifier, slot and incarnation
// (a clone, or the primary a restored snapshot was taken of) wrote it,
// and the two must share neither progress nor fencing from now on.
func Reincarnate(ctx context.Context, conn *pgx.Conn, c *Config, st *RelayState) error {
	return setIncarnation(ctx, conn, c, st, st.Incarnation)
}

// setIncarnation sets a new incarnation in the slot's row while it holds
// old (NULL for ""), and reads the row's into st.
func setIncarnation(ctx context.Context, conn *pgx.Conn, c *Config, st *RelayState, old string) error {
	var got string
	err := conn.QueryRow(ctx, `UPDATE `+StateTable(c).Sanitize()+` SET
			incarnation = CASE WHEN coalesce(incarnation, '') = $2 THEN $3 ELSE incarnation END, updated_at = now()
		WHERE slot_name = $1 RETURNING incarnation`, c.Slot, old, rand.Text()).Scan(&got)
	if err != nil {
		return fmt.Errorf("relay: record a new incarnation of slot %s: %w", c.Slot, err)
	}
	c.Logger.Info("the slot's state row has a new incarnation", "slot", c.Slot, "from_incarnation", cmp.Or(old, "none"), "to_incarnation", got)
	st.Incarnation = got
	return nil
}

// recordTimeline records in the slot's state row st that the server it
// streams on is now at timeline (a failover slot after a promotion), so
// that later sessions count as resuming on the server the row describes.
func recordTimeline(ctx context.Context, conn *pgx.Conn, c *Config, st *RelayState, timeline int32) error {
	_, err := conn.Exec(ctx, `UPDATE `+StateTable(c).Sanitize()+` SET timeline = $2, updated_at = now()
		WHERE slot_name = $1 AND system_identifier = $3 AND slot_created_lsn = $4::pg_lsn`,
		c.Slot, timeline, st.SystemID, st.CreatedLSN.String())
	if err != nil {
		return fmt.Errorf("relay: record the new timeline %d of slot %s: %w", timeline, c.Slot, err)
	}
	c.Logger.Info("recorded the server's new timeline in the relay state", "slot", c.Slot, "from_timeline", st.Timeline, "to_timeline", timeline)
	st.Timeline = timeline
	return nil
}

// adoptSlot records the state of a slot that exists without a state row (a
// relay upgraded from a version without state, or a slot made by hand):
// the relay cannot know what happened to it before, so it starts tracking
// from now.
func adoptSlot(ctx context.Context, conn *pgx.Conn, c *Config, confirmed pglogrepl.LSN) error {
	id, err := Identify(ctx, c)
	if err != nil {
		return err
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return fmt.Errorf("relay: record state of slot %s: %w", c.Slot, err)
	}
	// No commit time: recovery then backfills from the adoption time.
	if err := WriteNewState(ctx, conn, c, NewSlot{Consistent: confirmed, id: id, At: now}, nil); err != nil {
		return err
	}
	c.Logger.Info("recorded the state of an existing slot that had none; gap detection starts now", "slot", c.Slot,
		"confirmed_lsn", confirmed.String(), "state_table", StateTable(c).String())
	return nil
}

// Identify asks the server for its system identifier and timeline on a
// replication connection (IDENTIFY_SYSTEM: the current timeline, even right
// after a promotion, when pg_control_checkpoint still shows the old one).
func Identify(ctx context.Context, c *Config) (ServerIdentity, error) {
	id, _, err := IdentifyAt(ctx, c)
	return id, err
}

// IdentifyAt is Identify that also returns the server's current WAL flush
// position.
func IdentifyAt(ctx context.Context, c *Config) (ServerIdentity, pglogrepl.LSN, error) {
	rc, err := pgconnect.ConnectReplication(ctx, c.DatabaseURL)
	if err != nil {
		return ServerIdentity{}, 0, err
	}
	defer rc.Close(context.WithoutCancel(ctx))
	res, err := pglogrepl.IdentifySystem(ctx, rc)
	if err != nil {
		return ServerIdentity{}, 0, fmt.Errorf("relay: identify system: %w", err)
	}
	return ServerIdentity{SystemID: res.SystemID, Timeline: res.Timeline}, res.XLogPos, nil
}

// Bounds of the state writer (see Keeper).
const (
	// stateMinGap spaces the writes that raise the ceiling for events
	// read past it: at most ten a second, and confirmation waits at
	// most about this long for one.
	stateMinGap = 100 * time.Millisecond
	// stateRefresh is how often the confirmed position and commit time
	// are recorded while they advance. After a server restart the relay
	// republishes what Kafka acknowledged since the last write (see
	// replaySkip): about this much traffic, or what a relay catching up
	// publishes in this time.
	stateRefresh = 200 * time.Millisecond
	// coverMinGap spaces the writes an exactly-once commit waits for
	// (see Keeper.Cover): it waits about this long at most, on top of the
	// write itself, and the writes stay under a hundred a second.
	coverMinGap = 10 * time.Millisecond
	// StateSettle bounds how long a graceful stop waits for the ceiling to
	// cover its final confirmation (see Keeper.Settle).
	StateSettle = 3 * time.Second
	// idleSlack is how far keepalives may move the position the relay
	// would confirm past the ceiling before a write raises it: without
	// outbox traffic the slot then trails the server by at most this much
	// WAL (other tables' writes), and the state writes, which make far
	// less WAL themselves (a row update, at most a full-page image), do
	// not feed each other on an idle database.
	idleSlack = 64 << 10
)

// Keeper keeps the slot's state row ahead of what the stream confirms.
//
// The soundness argument. The stream never confirms past the ceiling
// (Cap, called from wal.Stream.SendStandbyStatus). A write reads W =
// pg_current_wal_lsn() first and then, in a second statement, sets ceiling = W only if the slot still
// exists with confirmed_flush_lsn <= the recorded ceiling. A slot created
// (or re-created) after that check has a confirmed_flush_lsn at or past
// its creation point, which is past W; one created before it fails the
// check (its creation point is past the old ceiling, written earlier), so
// the ceiling does not move. Hence "slot confirmed_flush_lsn > state
// ceiling" holds exactly when something other than this relay created or
// moved the slot. A slot moving back (PG 15 restores the last
// checkpointed position after a server restart) is a replay, never a gap.
// The row is written after confirmation (rate-limited), so the recorded
// confirmed position trails the slot's: recovery then backfills a little
// more, which only adds duplicates.
type Keeper struct {
	ceiling  atomic.Uint64 // the ceiling of the last committed write
	want     atomic.Uint64 // the highest commit end read with events
	messages atomic.Bool   // pgoutbox logical messages were read
	kick     chan struct{}
	// The identity of the row this process writes: a write matches only
	// while the row still describes the slot it started streaming.
	systemID   atomic.Pointer[string]
	createdLSN atomic.Uint64
	// covering counts the Cover calls waiting; raised is closed when the
	// ceiling rises (nil until a Cover call waits).
	covering atomic.Int32
	mu       sync.Mutex
	raised   chan struct{}
}

// NewKeeper returns a keeper; Start arms it for a session, Keep runs its
// writer.
func NewKeeper() *Keeper { return &Keeper{kick: make(chan struct{}, 1)} }

// Start arms the keeper for a session on the slot described by st.
func (k *Keeper) Start(st *RelayState) {
	k.systemID.Store(&st.SystemID)
	k.createdLSN.Store(uint64(st.CreatedLSN))
	k.ceiling.Store(uint64(st.Ceiling))
	k.want.Store(0)
	k.wake()
}

// Cover waits until the state row's ceiling covers pos, asking for the
// write at once (within coverMinGap of the last one): an exactly-once
// session calls it before each Kafka commit with the progress that commit
// records, so that the database holds, before Kafka does, what the
// progress may claim. A session trusts no progress past the row's ceiling
// (see sink.OpenExactlyOnce): a disk snapshot restored over the server
// rolls the row back with the WAL, and the progress Kafka kept from after
// the snapshot is then past it. Cover returns ctx's error when it ends
// first. A nil keeper does not wait.
func (k *Keeper) Cover(ctx context.Context, pos pglogrepl.LSN) error {
	if k == nil {
		return nil
	}
	k.covering.Add(1)
	defer k.covering.Add(-1)
	for {
		k.mu.Lock()
		if k.raised == nil {
			k.raised = make(chan struct{})
		}
		raised := k.raised
		k.mu.Unlock()
		if uint64(pos) <= k.ceiling.Load() {
			return nil
		}
		k.Read(pos, false)
		select {
		case <-raised:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wake tells the Cover calls waiting that the ceiling may have risen.
func (k *Keeper) wake() {
	k.mu.Lock()
	if k.raised != nil {
		close(k.raised)
		k.raised = nil
	}
	k.mu.Unlock()
}

// Read records that the stream read a transaction ending at end; with
// events, the ceiling is raised soon, so that its confirmation does not
// wait. A nil keeper does nothing.
func (k *Keeper) Read(end pglogrepl.LSN, messages bool) {
	if k == nil {
		return
	}
	if messages && !k.messages.Load() {
		k.messages.Store(true)
	}
	if uint64(end) <= k.ceiling.Load() {
		return
	}
	raise(&k.want, uint64(end))
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Cap returns pos, or the ceiling when pos is past it. A nil keeper caps
// nothing.
func (k *Keeper) Cap(pos pglogrepl.LSN) pglogrepl.LSN {
	if k == nil {
		return pos
	}
	return min(pos, pglogrepl.LSN(k.ceiling.Load()))
}

// Settle waits, at most timeout, until the ceiling covers pos (the final
// confirmation of a graceful stop), so that the stop does not leave
// acknowledged events to replay only because the keeper's last write was
// still under way. A nil keeper does not wait.
func (k *Keeper) Settle(pos pglogrepl.LSN, timeout time.Duration) {
	if k == nil {
		return
	}
	end := time.Now().Add(timeout)
	for uint64(pos) > k.ceiling.Load() && time.Now().Before(end) {
		if uint64(pos) > k.want.Load() {
			k.Read(pos, false) // ask for the write, as a commit read past the ceiling does
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Keep writes the state row while the relay streams (l says whether it
// leads and what it confirmed), until ctx ends.
func (k *Keeper) Keep(ctx context.Context, c *Config, l *pgconnect.Live) {
	w := &stateWriter{k: k, c: c, l: l}
	defer w.close(ctx)
	// Finer than stateRefresh, so a refresh is written within
	// stateMinGap of falling due, not a whole tick later.
	tick := time.NewTicker(stateMinGap)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.final(ctx)
			return
		case <-k.kick:
		case <-tick.C:
		}
		if _, _, _, due := w.due(); !due {
			continue
		}
		gap := stateMinGap
		if k.covering.Load() > 0 {
			gap = coverMinGap // a Kafka commit waits for this write
		}
		if wait := gap - time.Since(w.lastWrite); wait > 0 && !backoff.Sleep(ctx, wait) {
			continue // the select writes the final state
		}
		// Read after the wait: the confirmed position the row records
		// trails Kafka's acknowledgements by as little as it can, and a
		// session after a server restart republishes only what it trails
		// by (see replaySkip).
		if confirmed, at, msgs, due := w.due(); due {
			w.write(ctx, confirmed, at, msgs)
		}
	}
}

// due returns what the leader would write to the state row, and
// whether a write is due: the relay needs a higher ceiling, or the commit
// time or the messages flag changed and stateRefresh passed since the last
// write.
func (w *stateWriter) due() (confirmed uint64, at time.Time, msgs, due bool) {
	k := w.k
	tr := w.l.Tracker.Load()
	if !w.l.Leader.Load() || tr == nil || k.systemID.Load() == nil {
		return 0, time.Time{}, false, false
	}
	confirmed, at = tr.ConfirmedAt()
	ceiling := k.ceiling.Load()
	msgs = k.messages.Load()
	need := k.want.Load() > ceiling || confirmed > ceiling+idleSlack
	refresh := (!at.Equal(w.lastAt) || msgs != w.lastMsgs) && time.Since(w.lastWrite) >= stateRefresh
	return confirmed, at, msgs, need || refresh
}

// stateWriter is keep's connection and what it wrote last. A failed
// write drops the connection (the next one reconnects) and is logged once
// until a write works again.
type stateWriter struct {
	k         *Keeper
	c         *Config
	l         *pgconnect.Live
	conn      *pgx.Conn
	lastWrite time.Time
	lastAt    time.Time
	lastMsgs  bool
	failing   bool
}

func (w *stateWriter) write(ctx context.Context, confirmed uint64, at time.Time, msgs bool) {
	if w.conn == nil {
		conn, err := pgconnect.Connect(ctx, w.c.DatabaseURL)
		if err != nil {
			w.failed(ctx, err)
			return
		}
		w.conn = conn
	}
	err := w.writeState(ctx, w.conn, confirmed, at, msgs)
	w.lastWrite = time.Now()
	if err != nil {
		w.close(ctx)
		w.failed(ctx, err)
		return
	}
	if w.failing {
		w.c.Logger.Info("writing the relay state works again")
		w.failing = false
	}
	w.lastAt, w.lastMsgs = at, msgs
}

func (w *stateWriter) failed(ctx context.Context, err error) {
	if !w.failing && ctx.Err() == nil {
		w.c.Logger.Warn("writing the relay state failed; confirmation waits until it works", "error", err)
		w.failing = true
	}
}

func (w *stateWriter) close(ctx context.Context) {
	if w.conn != nil {
		w.conn.Close(context.WithoutCancel(ctx))
		w.conn = nil
	}
}

// finalTimeout bounds the state write on the way out.
const finalTimeout = 5 * time.Second

// final records, once Run stops, the confirmed position and commit
// time the rate limit held back (a graceful stop confirms last), so that
// status and recovery see where the relay stopped.
func (w *stateWriter) final(ctx context.Context) {
	k, conn, lastAt, lastMsgs := w.k, w.conn, w.lastAt, w.lastMsgs
	tr := w.l.Tracker.Load()
	if tr == nil || k.systemID.Load() == nil {
		return
	}
	confirmed, at := tr.ConfirmedAt()
	msgs := k.messages.Load()
	if at.Equal(lastAt) && msgs == lastMsgs {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalTimeout)
	defer cancel()
	err := func() error {
		if conn == nil {
			var err error
			if conn, err = pgconnect.Connect(ctx, w.c.DatabaseURL); err != nil {
				return err
			}
			defer conn.Close(ctx)
		}
		return w.writeState(ctx, conn, confirmed, at, msgs)
	}()
	if err != nil && !errors.Is(err, errStateMoved) {
		w.c.Logger.Warn("recording the relay's final position failed; it trails the slot (recovery only backfills more)", "error", err)
	}
}

// errStateMoved means the state row or the slot no longer match what this
// process streams: another relay recovered the slot, or it was re-created.
var errStateMoved = errors.New("relay: the slot or its state changed under this relay (re-created, recovered or dropped)")

// writeState records confirmed (with its commit time at) and raises the
// ceiling to the current WAL position; see Keeper for why in two steps.
func (w *stateWriter) writeState(ctx context.Context, conn *pgx.Conn, confirmed uint64, at time.Time, msgs bool) error {
	c, k := w.c, w.k
	var current string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&current); err != nil {
		return err
	}
	var commit *time.Time
	if !at.IsZero() {
		commit = &at
	}
	var ceiling string
	err := conn.QueryRow(ctx, `UPDATE `+StateTable(c).Sanitize()+` AS s SET
			ceiling_lsn = greatest(s.ceiling_lsn, $2::pg_lsn),
			confirmed_commit_time = CASE WHEN $3::pg_lsn >= s.confirmed_lsn THEN coalesce($4, s.confirmed_commit_time) ELSE s.confirmed_commit_time END,
			confirmed_lsn = greatest(s.confirmed_lsn, $3::pg_lsn),
			messages_seen = s.messages_seen OR $5,
			updated_at = now()
		WHERE s.slot_name = $1 AND s.system_identifier = $6 AND s.slot_created_lsn = $7::pg_lsn
		  AND EXISTS (SELECT 1 FROM pg_replication_slots p WHERE p.slot_name = $1 AND p.confirmed_flush_lsn <= s.ceiling_lsn)
		RETURNING s.ceiling_lsn::text`,
		c.Slot, current, pglogrepl.LSN(confirmed).String(), commit, msgs, *k.systemID.Load(), pglogrepl.LSN(k.createdLSN.Load()).String()).
		Scan(&ceiling)
	if errors.Is(err, pgx.ErrNoRows) {
		return errStateMoved
	}
	if err != nil {
		return err
	}
	lsn, err := pglogrepl.ParseLSN(ceiling)
	if err != nil {
		return err
	}
	raise(&k.ceiling, uint64(lsn))
	k.wake()
	return nil
}

// raise sets a to v if v is higher, atomically.
func raise(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
