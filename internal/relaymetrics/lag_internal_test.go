package relaymetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
)

// The slot gauges map each reading of pg_replication_slots, including the
// states a test database cannot easily reach (lost, a limited
// safe_wal_size, a dropped slot).
func TestSlotMetricsSet(t *testing.T) {
	t.Parallel()
	var l pgconnect.Live
	m := newSlotMetrics("s", &l)
	reg := prometheus.NewPedanticRegistry()
	for _, c := range m.collectors() {
		reg.MustRegister(c)
	}
	ptr := func(v int64) *int64 { return &v }
	lost := "lost"
	m.Set(SlotReading{Exists: true, Active: true, Lag: ptr(100), Retained: ptr(200), WALStatus: lost, SafeWALSize: ptr(-5)})
	if got := value(t, m.walStatus.WithLabelValues("s", "lost")); got != 1 {
		t.Errorf("wal_status{lost} = %v, want 1", got)
	}
	for _, s := range []string{"reserved", "extended", "unreserved"} {
		if got := value(t, m.walStatus.WithLabelValues("s", s)); got != 0 {
			t.Errorf("wal_status{%s} = %v, want 0", s, got)
		}
	}
	if got := value(t, m.safeWALSize.WithLabelValues("s")); got != -5 {
		t.Errorf("safe_wal_size = %v, want -5", got)
	}
	if n := count(t, m.safeWALSize); n != 1 {
		t.Fatalf("%d safe_wal_size series", n)
	}
	m.Set(SlotReading{Exists: true, Lag: ptr(1), Retained: ptr(2), WALStatus: lost})
	if n := count(t, m.safeWALSize); n != 0 {
		t.Errorf("safe_wal_size still exported after it became NULL")
	}
	if got := value(t, m.active.WithLabelValues("s")); got != 0 {
		t.Errorf("active = %v, want 0", got)
	}
	m.Set(SlotReading{Exists: false})
	for _, v := range []*prometheus.GaugeVec{m.lagBytes, m.retained, m.walStatus, m.safeWALSize} {
		if n := count(t, v); n != 0 {
			t.Errorf("%d series left for a dropped slot", n)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}

	// The live gauges: a standby reports no lag of its own.
	tr := acktrack.New(0)
	tr.Add(tr.BeginAt(time.Now().Add(-time.Minute)), 1)
	l.Tracker.Store(tr)
	if v := value(t, m.lagSeconds); v < 59 || v > 61 {
		t.Errorf("lag_seconds = %v with a transaction committed a minute ago", v)
	}
	l.Standby.Store(true)
	if v := value(t, m.lagSeconds) + value(t, m.sinceLastAck); v != 0 {
		t.Errorf("standby lag_seconds + seconds_since_last_ack = %v, want 0", v)
	}
}

// collect returns the gauge values c exports.
func collect(t *testing.T, c prometheus.Collector) []float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	var out []float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out = append(out, pb.GetGauge().GetValue())
	}
	return out
}

func count(t *testing.T, c prometheus.Collector) int { return len(collect(t, c)) }

// value returns the single value c exports.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	v := collect(t, c)
	if len(v) != 1 {
		t.Fatalf("%d values, want 1", len(v))
	}
	return v[0]
}
