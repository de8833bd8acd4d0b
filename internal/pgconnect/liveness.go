package pgconnect

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
	// DefaultLivenessBound is the bound when the server's
	// wal_sender_timeout is 0 (the server never times a walsender out).
	DefaultLivenessBound = 30 * time.Second
	// PromptStatusGap is the least time between two status updates sent
	// because the confirmed position advanced (the periodic ones come
	// every StatusInterval).
	PromptStatusGap = 100 * time.Millisecond
	// SessionStartTimeout bounds opening the replication connection and
	// starting replication, so a connection that hangs (a blackholing
	// network) is retried.
	SessionStartTimeout = 30 * time.Second
)

// errServerSilent ends a session whose walsender gave no sign of life
// within the liveness bound; the relay reconnects.
var errServerSilent = errors.New("relay: no sign of life from the replication connection within the liveness bound")

// Liveness is what a session knows about the server's timing, read from
// the replication connection before streaming starts.
type Liveness struct {
	// SenderTimeout is the server's wal_sender_timeout for this
	// connection; 0 means disabled.
	SenderTimeout time.Duration
	// Bound is how long the relay goes without a sign of life before it
	// stops publishing and reconnects.
	Bound time.Duration
	// StatusEvery is the time between periodic status updates: at most
	// StatusInterval, and a third of bound so that two or three replies
	// to them arrive within every bound.
	StatusEvery time.Duration
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
	bound = DefaultLivenessBound
	if senderTimeout > 0 {
		bound = senderTimeout / 2
	}
	return bound, min(statusInterval, bound/3)
}

// ReadLiveness reads wal_sender_timeout and the server's clock on the
// replication connection (replication=database accepts SQL), so a
// per-connection setting (options=-c wal_sender_timeout=...) counts, and
// sets TCP_USER_TIMEOUT on the socket to the bound.
func ReadLiveness(ctx context.Context, conn *pgconn.PgConn, statusInterval time.Duration) (Liveness, error) {
	before := time.Now()
	res, err := conn.Exec(ctx, `SELECT setting, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
		FROM pg_settings WHERE name = 'wal_sender_timeout'`).ReadAll()
	after := time.Now()
	if err != nil {
		return Liveness{}, fmt.Errorf("relay: read wal_sender_timeout: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 2 {
		return Liveness{}, errors.New("relay: read wal_sender_timeout: unexpected result")
	}
	row := res[0].Rows[0]
	ms, err1 := strconv.ParseInt(string(row[0]), 10, 64)
	us, err2 := strconv.ParseInt(string(row[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Liveness{}, fmt.Errorf("relay: read wal_sender_timeout: %w", err)
	}
	lv := Liveness{SenderTimeout: time.Duration(ms) * time.Millisecond}
	lv.Bound, lv.StatusEvery = livenessBound(lv.SenderTimeout, statusInterval)
	mid := before.Add(after.Sub(before) / 2)
	lv.offset = time.UnixMicro(us).Sub(mid)
	setUserTimeout(conn.Conn(), lv.Bound)
	return lv, nil
}

// HeardAt is when, by our clock, the server sent a message stamped
// serverTime that we received at recv: the server's clock corrected by the
// session's offset, never later than recv.
func (lv *Liveness) HeardAt(serverTime, recv time.Time) time.Time {
	at := serverTime.Add(-lv.offset)
	if at.After(recv) {
		return recv
	}
	return at
}

// StaleError says how long the relay has been without a sign of life.
type StaleError struct {
	age, bound time.Duration
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: last sign %v ago, bound %v", errServerSilent, e.age.Round(time.Millisecond), e.bound)
}

func (e *StaleError) Unwrap() error { return errServerSilent }
