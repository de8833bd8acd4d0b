package relaymetrics

import "github.com/prometheus/client_golang/prometheus"

// Clock is what the relay's liveness clock (pgconnect.Live) tells the
// gauges read live; the metrics import no stage.
type Clock interface {
	LagSeconds() float64
	SinceLastAck() float64
	SinceServer() float64
	IsLeader() bool
}

// SlotReading is one reading of the slot's row of pg_replication_slots,
// as the gauges show it; nil figures are NULL.
type SlotReading struct {
	Exists, Active             bool
	Lag, Retained, SafeWALSize *int64
	WALStatus                  string
	// StandbyWait counts the standby slots in synchronized_standby_slots
	// that no standby streams, for a failover slot.
	StandbyWait int
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// SlotMetrics are the per-slot gauges: the slot's figures polled from the
// database, and the relay's own lag and role read live.
type SlotMetrics struct {
	slot         string
	lagBytes     *prometheus.GaugeVec
	retained     *prometheus.GaugeVec
	walStatus    *prometheus.GaugeVec
	safeWALSize  *prometheus.GaugeVec
	active       *prometheus.GaugeVec
	standbyWait  *prometheus.GaugeVec
	lagSeconds   prometheus.GaugeFunc
	sinceLastAck prometheus.GaugeFunc
	sinceServer  prometheus.GaugeFunc
	leader       prometheus.GaugeFunc
}

func newSlotMetrics(slot string, l Clock) *SlotMetrics {
	const ns, sub = "pgoutbox", "relay"
	vec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help},
			append([]string{"slot"}, labels...))
	}
	fn := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help,
			ConstLabels: prometheus.Labels{"slot": slot}}, f)
	}
	return &SlotMetrics{
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
		standbyWait: vec("slot_standby_slots_inactive",
			"For a failover slot (PG 17+): the physical slots named in synchronized_standby_slots that no standby streams. Above 0 the primary sends the relay nothing new: it waits for those standbys (polled)."),
		lagSeconds: fn("lag_seconds",
			"Now minus the commit time of the oldest committed transaction this relay read and has not confirmed; 0 when caught up or standby.",
			l.LagSeconds),
		sinceLastAck: fn("seconds_since_last_ack",
			"Time since this relay last confirmed a new WAL position or was caught up; 0 while standby.",
			l.SinceLastAck),
		sinceServer: fn("seconds_since_server_message",
			"Time since this relay last knew its walsender alive: the send time of the server's latest message (every status update asks for one), or its own status update while it waits for Kafka. Past the liveness bound (wal_sender_timeout/2) it stops publishing and reconnects; rises while it cannot reconnect; 0 while standby.",
			l.SinceServer),
		leader: fn("leader", "1 while this relay streams the slot, 0 while it is a standby or disconnected.",
			func() float64 {
				if l.IsLeader() {
					return 1
				}
				return 0
			}),
	}
}

func (m *SlotMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lagBytes, m.retained, m.walStatus, m.safeWALSize, m.active, m.standbyWait, m.lagSeconds,
		m.sinceLastAck, m.sinceServer, m.leader}
}

// Set records one reading of the slot.
func (m *SlotMetrics) Set(r SlotReading) {
	if !r.Exists {
		// No figures for a slot that is not there.
		for _, v := range []*prometheus.GaugeVec{m.lagBytes, m.retained, m.walStatus, m.safeWALSize, m.standbyWait} {
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
	setOrDelete(m.lagBytes, r.Lag)
	setOrDelete(m.retained, r.Retained)
	setOrDelete(m.safeWALSize, r.SafeWALSize)
	for _, s := range walStatuses {
		v := 0.0
		if s == r.WALStatus {
			v = 1
		}
		m.walStatus.WithLabelValues(m.slot, s).Set(v)
	}
	active := 0.0
	if r.Active {
		active = 1
	}
	m.active.WithLabelValues(m.slot).Set(active)
	m.standbyWait.WithLabelValues(m.slot).Set(float64(r.StandbyWait))
}
