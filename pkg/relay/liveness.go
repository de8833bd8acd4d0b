package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Liveness: the relay publishes only while it knows its walsender is alive,
// so a relay that was frozen (SIGSTOP, VM pause, long GC) or cut off by a
// half-open connection stops writing to Kafka and reconnects before the
// server hands the slot to another relay. See "Liveness" in the package
// doc.

const (
	// defaultLivenessBound is the bound when the server's
	// wal_sender_timeout is 0 (the server never times a walsender out).
	defaultLivenessBound = 30 * time.Second
	// promptStatusGap is the least time between two status updates sent
	// because the confirmed position advanced (the periodic ones come
	// every StatusInterval).
	promptStatusGap = 100 * time.Millisecond
	// sessionStartTimeout bounds opening the replication connection and
	// starting replication, so a connection that hangs (a blackholing
	// network) is retried.
	sessionStartTimeout = 30 * time.Second
)

// errServerSilent ends a session whose walsender gave no sign of life
// within the liveness bound; the relay reconnects.
var errServerSilent = errors.New("relay: no sign of life from the replication connection within the liveness bound")

// liveness is what a session knows about the server's timing, read from
// the replication connection before streaming starts.
type liveness struct {
	// senderTimeout is the server's wal_sender_timeout for this
	// connection; 0 means disabled.
	senderTimeout time.Duration
	// bound is how long the relay goes without a sign of life before it
	// stops publishing and reconnects.
	bound time.Duration
	// statusEvery is the time between periodic status updates: at most
	// StatusInterval, and a third of bound so that two or three replies
	// to them arrive within every bound.
	statusEvery time.Duration
	// offset is the server's clock minus ours, measured at session start
	// (to within half the round trip).
	offset time.Duration
}

// livenessBound derives the bound from wal_sender_timeout. The server
// ends a walsender (and lets another relay take the slot) once it heard
// nothing from it for wal_sender_timeout; the relay sends a status update
// at least every bound/3 while alive, so it stops publishing by bound +
// bound/3 = 2/3 of wal_sender_timeout after its last update, a third of
// the timeout before the server can give the slot away.
func livenessBound(senderTimeout, statusInterval time.Duration) (bound, statusEvery time.Duration) {
	bound = defaultLivenessBound
	if senderTimeout > 0 {
		bound = senderTimeout / 2
	}
	return bound, min(statusInterval, bound/3)
}

// readLiveness reads wal_sender_timeout and the server's clock on the
// replication connection (replication=database accepts SQL), so a
// per-connection setting (options=-c wal_sender_timeout=...) counts, and
// sets TCP_USER_TIMEOUT on the socket to the bound.
func readLiveness(ctx context.Context, conn *pgconn.PgConn, statusInterval time.Duration) (liveness, error) {
	before := time.Now()
	res, err := conn.Exec(ctx, `SELECT setting, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
		FROM pg_settings WHERE name = 'wal_sender_timeout'`).ReadAll()
	after := time.Now()
	if err != nil {
		return liveness{}, fmt.Errorf("relay: read wal_sender_timeout: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 2 {
		return liveness{}, errors.New("relay: read wal_sender_timeout: unexpected result")
	}
	row := res[0].Rows[0]
	ms, err1 := strconv.ParseInt(string(row[0]), 10, 64)
	us, err2 := strconv.ParseInt(string(row[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return liveness{}, fmt.Errorf("relay: read wal_sender_timeout: %w", err)
	}
	lv := liveness{senderTimeout: time.Duration(ms) * time.Millisecond}
	lv.bound, lv.statusEvery = livenessBound(lv.senderTimeout, statusInterval)
	mid := before.Add(after.Sub(before) / 2)
	lv.offset = time.UnixMicro(us).Sub(mid)
	setUserTimeout(conn.Conn(), lv.bound)
	return lv, nil
}

// heardAt is when, by our clock, the server sent a message stamped
// serverTime that we received at recv: the server's clock corrected by the
// session's offset, never later than recv.
func (lv *liveness) heardAt(serverTime, recv time.Time) time.Time {
	at := serverTime.Add(-lv.offset)
	if at.After(recv) {
		return recv
	}
	return at
}

// staleError says how long the relay has been without a sign of life.
type staleError struct {
	age, bound time.Duration
}

func (e *staleError) Error() string {
	return fmt.Sprintf("%v: last sign %v ago, bound %v", errServerSilent, e.age.Round(time.Millisecond), e.bound)
}

func (e *staleError) Unwrap() error { return errServerSilent }

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
