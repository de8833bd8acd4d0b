package pgconnect

import (
	"sync/atomic"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
)

// Live is the relay's role (leader streaming the slot, or standby) and its
// liveness clock: what Ready and, at scrape time, the lag gauges read.
type Live struct {
	Leader  atomic.Bool                      // streaming the slot
	Standby atomic.Bool                      // waiting: another process streams the slot
	Tracker atomic.Pointer[acktrack.Tracker] // of the current (or last) session
	lastAck atomic.Int64                     // unix nanoseconds of the last advance or caught-up status update
	// alive is when (monoNanos) the relay last knew
	// its walsender alive: the send time of the latest server message,
	// or a status update of its own sent while the reader waited for
	// Kafka (see Vouch). bound is the session's liveness bound.
	alive atomic.Int64
	bound atomic.Int64
}

// Begin starts a session's liveness clock: connected now, with bound.
func (l *Live) Begin(now time.Time, bound time.Duration) {
	l.bound.Store(int64(bound))
	l.alive.Store(monoNanos(now))
}

// monoBase anchors monoNanos.
var monoBase = time.Now()

// monoNanos is t in nanoseconds since monoBase, on the monotonic clock when
// t has a reading of it (time.Now does), so that a step of the wall clock
// does not move the liveness clock.
func monoNanos(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// Heard records a server message sent at sent and received at recv (our
// clock). While the relay has been alive without a break (the previous
// sign is at most half the bound old, see chained), receiving is a sign of life: a reader
// draining a backlog reads old data from a live connection. After a break
// (a freeze, a stall), only what the server sent recently counts, so data
// that waited in the socket buffer through a freeze does not. Only the
// session's reader calls Heard and Vouch.
func (l *Live) Heard(sent, recv time.Time) {
	at := sent
	if l.chained(recv) {
		at = recv
	}
	if n := monoNanos(at); n > l.alive.Load() {
		l.alive.Store(n)
	}
}

// Vouch records a status update the reader sent at now while it was not
// reading (waiting for Kafka): the server hears from the relay, so the
// walsender lives on. It counts only without a break: after a freeze, only
// a fresh server message would do, and the reader cannot read one while it
// waits, so the session ends.
func (l *Live) Vouch(now time.Time) {
	if l.chained(now) {
		l.alive.Store(monoNanos(now))
	}
}

// chained reports whether the last sign of life is at most half the bound
// before now. The reader hears the server at least every third of the
// bound (the replies to its status updates), so a longer gap is a break.
func (l *Live) chained(now time.Time) bool {
	return time.Duration(monoNanos(now)-l.alive.Load()) <= time.Duration(l.bound.Load())/2
}

// Stale returns an error wrapping errServerSilent when the relay has been
// without a sign of life for longer than the bound.
func (l *Live) Stale(now time.Time) error {
	age, bound := time.Duration(monoNanos(now)-l.alive.Load()), time.Duration(l.bound.Load())
	if age > bound {
		return &StaleError{age: age, bound: bound}
	}
	return nil
}

// LiveUntil is when the relay, without a new sign of life, turns stale:
// the last moment a write may start.
func (l *Live) LiveUntil(now time.Time) time.Time {
	age, bound := time.Duration(monoNanos(now)-l.alive.Load()), time.Duration(l.bound.Load())
	return now.Add(bound - age)
}

// SinceServer is the time since the last sign of life of the
// walsender; it keeps rising while the relay fails to reconnect, and is 0
// while it is a standby (nothing to hear).
func (l *Live) SinceServer() float64 {
	if l.Standby.Load() {
		return 0
	}
	return max(0, time.Duration(monoNanos(time.Now())-l.alive.Load()).Seconds())
}

// Acked records that the relay confirmed a new position or was caught up.
func (l *Live) Acked(now time.Time) { l.lastAck.Store(now.UnixNano()) }

// LagSeconds is now minus the commit time of the oldest transaction this
// relay holds unconfirmed; 0 when it holds none or is a standby (the
// active relay reports the slot's lag then).
func (l *Live) LagSeconds() float64 {
	tr := l.Tracker.Load()
	if tr == nil || l.Standby.Load() {
		return 0
	}
	oldest, ok := tr.Oldest()
	if !ok {
		return 0
	}
	return max(0, time.Since(oldest).Seconds())
}

// SinceLastAck is the time since the relay last confirmed a new position
// or was caught up; 0 while it is a standby.
func (l *Live) SinceLastAck() float64 {
	if l.Standby.Load() {
		return 0
	}
	return max(0, time.Since(time.Unix(0, l.lastAck.Load())).Seconds())
}

// IsLeader reports whether the relay streams the slot (Leader).
func (l *Live) IsLeader() bool { return l.Leader.Load() }
