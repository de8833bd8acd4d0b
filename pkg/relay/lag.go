package relay

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
)

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// live is the relay's state that the lag gauges read at scrape time.
type live struct {
	leader  atomic.Bool                      // streaming the slot
	standby atomic.Bool                      // waiting: another process streams the slot
	tracker atomic.Pointer[acktrack.Tracker] // of the current (or last) session
	lastAck atomic.Int64                     // unix nanoseconds of the last advance or caught-up status update
	// alive is when (monoNanos) the relay last knew
	// its walsender alive: the send time of the latest server message,
	// or a status update of its own sent while the reader waited for
	// Kafka (see vouch). bound is the session's liveness bound.
	alive atomic.Int64
	bound atomic.Int64
}

// begin starts a session's liveness clock: connected now, with bound.
func (l *live) begin(now time.Time, bound time.Duration) {
	l.bound.Store(int64(bound))
	l.alive.Store(monoNanos(now))
}

// monoBase anchors monoNanos.
var monoBase = time.Now()

// monoNanos is t in nanoseconds since monoBase, on the monotonic clock when
// t has a reading of it (time.Now does), so that a step of the wall clock
// does not move the liveness clock.
func monoNanos(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// heard records a server message sent at sent and received at recv (our
// clock). While the relay has been alive without a break (the previous
// sign is at most chainGap old), receiving is a sign of life: a reader
// draining a backlog reads old data from a live connection. After a break
// (a freeze, a stall), only what the server sent recently counts, so data
// that waited in the socket buffer through a freeze does not. Only the
// session's reader calls heard and vouch.
func (l *live) heard(sent, recv time.Time) {
	at := sent
	if l.chained(recv) {
		at = recv
	}
	if n := monoNanos(at); n > l.alive.Load() {
		l.alive.Store(n)
	}
}

// vouch records a status update the reader sent at now while it was not
// reading (waiting for Kafka): the server hears from the relay, so the
// walsender lives on. It counts only without a break: after a freeze, only
// a fresh server message would do, and the reader cannot read one while it
// waits, so the session ends.
func (l *live) vouch(now time.Time) {
	if l.chained(now) {
		l.alive.Store(monoNanos(now))
	}
}

// chained reports whether the last sign of life is at most half the bound
// before now. The reader hears the server at least every third of the
// bound (the replies to its status updates), so a longer gap is a break.
func (l *live) chained(now time.Time) bool {
	return time.Duration(monoNanos(now)-l.alive.Load()) <= time.Duration(l.bound.Load())/2
}

// stale returns an error wrapping errServerSilent when the relay has been
// without a sign of life for longer than the bound.
func (l *live) stale(now time.Time) error {
	age, bound := time.Duration(monoNanos(now)-l.alive.Load()), time.Duration(l.bound.Load())
	if age > bound {
		return &staleError{age: age, bound: bound}
	}
	return nil
}

// sinceServer is the time since the last sign of life of the
// walsender; it keeps rising while the relay fails to reconnect, and is 0
// while it is a standby (nothing to hear).
func (l *live) sinceServer() float64 {
	if l.standby.Load() {
		return 0
	}
	return max(0, time.Duration(monoNanos(time.Now())-l.alive.Load()).Seconds())
}

// acked records that the relay confirmed a new position or was caught up.
func (l *live) acked(now time.Time) { l.lastAck.Store(now.UnixNano()) }

// lagSeconds is now minus the commit time of the oldest transaction this
// relay holds unconfirmed; 0 when it holds none or is a standby (the
// active relay reports the slot's lag then).
func (l *live) lagSeconds() float64 {
	tr := l.tracker.Load()
	if tr == nil || l.standby.Load() {
		return 0
	}
	oldest, ok := tr.Oldest()
	if !ok {
		return 0
	}
	return max(0, time.Since(oldest).Seconds())
}

// sinceLastAck is the time since the relay last confirmed a new position
// or was caught up; 0 while it is a standby.
func (l *live) sinceLastAck() float64 {
	if l.standby.Load() {
		return 0
	}
	return max(0, time.Since(time.Unix(0, l.lastAck.Load())).Seconds())
}

// slotMetrics are the per-slot gauges: the slot's figures polled from the
// database, and the relay's own lag and role read live.
type slotMetrics struct {
	slot         string
	lagBytes     *prometheus.GaugeVec
	retained     *prometheus.GaugeVec
	walStatus    *prometheus.GaugeVec
	safeWALSize  *prometheus.GaugeVec
	active       *prometheus.GaugeVec
	lagSeconds   prometheus.GaugeFunc
	sinceLastAck prometheus.GaugeFunc
	sinceServer  prometheus.GaugeFunc
	leader       prometheus.GaugeFunc
}

func newSlotMetrics(slot string, l *live) *slotMetrics {
	const ns, sub = "pgoutbox", "relay"
	vec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help},
			append([]string{"slot"}, labels...))
	}
	fn := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help,
			ConstLabels: prometheus.Labels{"slot": slot}}, f)
	}
	return &slotMetrics{
		slot: slot,
		lagBytes: vec("slot_lag_bytes",
			"Current WAL position minus the slot's confirmed_flush_lsn (polled)."),
		retained: vec("slot_retained_wal_bytes",
			"Current WAL position minus the slot's restart_lsn: WAL the slot keeps on the server's disk (polled)."),
		walStatus: vec("slot_wal_status",
			"1 for the slot's current pg_replication_slots.wal_status, 0 for the others (polled).", "status"),
		safeWALSize: vec("slot_safe_wal_size_bytes",
			"WAL that can still be written before the slot is at risk of losing WAL (pg_replication_slots.safe_wal_size; absent when max_slot_wal_keep_size is unlimited)."),
		active: vec("slot_active",
			"1 while some process (this relay or another) streams the slot (polled)."),
		lagSeconds: fn("lag_seconds",
			"Now minus the commit time of the oldest committed transaction this relay read and has not confirmed; 0 when caught up or standby.",
			l.lagSeconds),
		sinceLastAck: fn("seconds_since_last_ack",
			"Time since this relay last confirmed a new WAL position or was caught up; 0 while standby.",
			l.sinceLastAck),
		sinceServer: fn("seconds_since_server_message",
			"Time since this relay last knew its walsender alive: the send time of the server's latest message (every status update asks for one), or its own status update while it waits for Kafka. Past the liveness bound (wal_sender_timeout/2) it stops publishing and reconnects; rises while it cannot reconnect; 0 while standby.",
			l.sinceServer),
		leader: fn("leader", "1 while this relay streams the slot, 0 while it is a standby or disconnected.",
			func() float64 {
				if l.leader.Load() {
					return 1
				}
				return 0
			}),
	}
}

func (m *slotMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lagBytes, m.retained, m.walStatus, m.safeWALSize, m.active, m.lagSeconds,
		m.sinceLastAck, m.sinceServer, m.leader}
}

// set records one reading of the slot.
func (m *slotMetrics) set(r slotRow) {
	if !r.exists {
		// No figures for a slot that is not there.
		for _, v := range []*prometheus.GaugeVec{m.lagBytes, m.retained, m.walStatus, m.safeWALSize} {
			v.Reset()
		}
		m.active.WithLabelValues(m.slot).Set(0)
		return
	}
	setOrDelete := func(v *prometheus.GaugeVec, p *int64) {
		if p == nil {
			v.DeleteLabelValues(m.slot)
			return
		}
		v.WithLabelValues(m.slot).Set(float64(*p))
	}
	setOrDelete(m.lagBytes, r.lag)
	setOrDelete(m.retained, r.retained)
	setOrDelete(m.safeWALSize, r.safeWALSize)
	for _, s := range walStatuses {
		v := 0.0
		if s == deref(r.walStatus) {
			v = 1
		}
		m.walStatus.WithLabelValues(m.slot, s).Set(v)
	}
	active := 0.0
	if r.active {
		active = 1
	}
	m.active.WithLabelValues(m.slot).Set(active)
}

// pollSlot reads the slot every LagPollInterval on a regular connection
// and updates the slot gauges, until ctx ends. It runs whether the relay
// streams or waits as a standby.
func (r *Relay) pollSlot(ctx context.Context) {
	(&periodic{
		cfg: &r.cfg, what: "reading the slot's lag", interval: r.cfg.LagPollInterval, now: true,
		job: func(ctx context.Context, conn *pgx.Conn) error {
			row, err := readSlot(ctx, conn, r.cfg.Slot)
			if err == nil {
				r.m.slot.set(row)
			}
			return err
		},
	}).run(ctx)
}
