package relay_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// gauge returns the value of the gauge name whose labels include want, and
// whether it exists.
func gauge(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// slotLag reads the slot's lag and retained WAL from the database.
func (b *bundle) slotLag(t *testing.T) (lag, retained int64) {
	t.Helper()
	err := b.db.Pool.QueryRow(context.Background(), `
		SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
		       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint
		  FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&lag, &retained)
	if err != nil {
		t.Fatal(err)
	}
	return lag, retained
}

// With the relay stopped while rows keep arriving, the lag grows; the
// gauges of the restarted relay match pg_replication_slots while it cannot
// publish, and return to about zero once it can.
func TestLagMetricsFollowTheSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.LagPollInterval = 100 * time.Millisecond
		c.MaxRetryBackoff = 300 * time.Millisecond
	})
	var outage atomic.Int32
	refuseProduce(b.kafka, &outage)
	run := b.start(t)
	ids := b.insert(t, msg("a", 0))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	slot := map[string]string{"slot": b.cfg.Slot}
	if v, _ := gauge(t, b.reg, "pgoutbox_relay_leader", slot); v != 1 {
		t.Fatalf("leader = %v while streaming, want 1", v)
	}

	// Stopped: rows arrive, the slot's lag grows.
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b.waitReleased(t) // the final confirmation may still move the slot until then
	lag0, _ := b.slotLag(t)
	beforeFirst := time.Now()
	ids = append(ids, b.insert(t, msg("a", 1))...)
	afterFirst := time.Now()
	for i := 2; i < 20; i++ {
		ids = append(ids, b.insert(t, msg("b", i))...)
	}
	if lag, _ := b.slotLag(t); lag <= lag0 {
		t.Fatalf("slot lag %d bytes did not grow from %d while the relay was stopped", lag, lag0)
	}

	// Restarted, but Kafka refuses every write: nothing is confirmed, the
	// oldest held transaction is the first one written while stopped.
	outage.Store(outageNack)
	b.start(t)
	var first float64
	testenv.WaitFor(t, 30*time.Second, "lag_seconds to cover the stop", func() (bool, error) {
		lo := time.Since(afterFirst).Seconds()
		v, _ := gauge(t, b.reg, "pgoutbox_relay_lag_seconds", slot)
		hi := time.Since(beforeFirst).Seconds()
		if v > hi+0.01 {
			t.Fatalf("lag_seconds %.3f beyond the first stopped commit's age (%.3f..%.3f)", v, lo, hi)
		}
		first = v
		return v >= lo, nil
	})
	testenv.WaitFor(t, 30*time.Second, "lag_seconds to grow", func() (bool, error) {
		v, _ := gauge(t, b.reg, "pgoutbox_relay_lag_seconds", slot)
		return v >= first+0.3, nil
	})

	// The polled gauges equal the database's figures: the confirmed and
	// restart positions are frozen, so the gauge lies between a reading of
	// the database before it was polled and one after.
	for _, m := range []struct {
		name string
		db   func() int64
	}{
		{"pgoutbox_relay_slot_lag_bytes", func() int64 { l, _ := b.slotLag(t); return l }},
		{"pgoutbox_relay_slot_retained_wal_bytes", func() int64 { _, r := b.slotLag(t); return r }},
	} {
		before := m.db()
		var v float64
		testenv.WaitFor(t, 10*time.Second, m.name+" polled", func() (bool, error) {
			v, _ = gauge(t, b.reg, m.name, slot)
			return v >= float64(before), nil
		})
		if after := m.db(); v > float64(after) {
			t.Fatalf("%s = %v, beyond the database's %d", m.name, v, after)
		}
		t.Logf("%s = %v (database %d..)", m.name, v, before)
	}
	var walStatus string
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`,
		b.cfg.Slot).Scan(&walStatus); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"reserved", "extended", "unreserved", "lost"} {
		want := 0.0
		if s == walStatus {
			want = 1
		}
		if v, ok := gauge(t, b.reg, "pgoutbox_relay_slot_wal_status", map[string]string{"slot": b.cfg.Slot, "status": s}); !ok || v != want {
			t.Errorf("slot_wal_status{status=%q} = %v (present %v), want %v (database: %s)", s, v, ok, want, walStatus)
		}
	}
	if _, ok := gauge(t, b.reg, "pgoutbox_relay_slot_safe_wal_size_bytes", slot); ok {
		t.Error("slot_safe_wal_size_bytes present although max_slot_wal_keep_size is unlimited (safe_wal_size NULL)")
	}
	for _, name := range []string{"pgoutbox_relay_slot_active", "pgoutbox_relay_leader"} {
		if v, _ := gauge(t, b.reg, name, slot); v != 1 {
			t.Errorf("%s = %v, want 1", name, v)
		}
	}
	if v, _ := gauge(t, b.reg, "pgoutbox_relay_seconds_since_last_ack", slot); v < 0.3 {
		t.Errorf("seconds_since_last_ack = %v while nothing can be confirmed", v)
	}

	// Kafka is back: everything arrives, the lag returns to about zero.
	outage.Store(outageOff)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	testenv.WaitFor(t, 30*time.Second, "lag back to about zero", func() (bool, error) {
		sec, _ := gauge(t, b.reg, "pgoutbox_relay_lag_seconds", slot)
		bytes, _ := gauge(t, b.reg, "pgoutbox_relay_slot_lag_bytes", slot)
		ack, _ := gauge(t, b.reg, "pgoutbox_relay_seconds_since_last_ack", slot)
		// Other tests write WAL on the shared server: "about zero" bytes
		// is well under one segment.
		return sec == 0 && bytes < 1<<20 && ack < 2, nil
	})
}

// With the heartbeat on, a database without writes sees the slot advance
// over heartbeat transactions, which are never published.
func TestHeartbeatAdvancesIdleSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.HeartbeatInterval = 100 * time.Millisecond })
	ctx := context.Background()
	// A second slot records what the database writes, to tell heartbeats
	// from WAL that other databases write on the shared server.
	spy := b.cfg.Slot + "_spy"
	if _, err := b.db.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, spy); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	start := b.confirmedFlush(t)
	var beat string // LSN of a heartbeat after start
	testenv.WaitFor(t, 30*time.Second, "a heartbeat in the WAL", func() (bool, error) {
		rows, err := b.db.Pool.Query(ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_changes($1, NULL, NULL)
			WHERE lsn > $2::pg_lsn`, spy, start.String())
		if err != nil {
			return false, err
		}
		defer rows.Close()
		for rows.Next() {
			var lsn, data string
			if err := rows.Scan(&lsn, &data); err != nil {
				return false, err
			}
			switch {
			case strings.Contains(data, "prefix: "+relay.HeartbeatPrefix+","):
				beat = lsn
			case strings.HasPrefix(data, "BEGIN"), strings.HasPrefix(data, "COMMIT"):
			case strings.HasPrefix(data, "table public."+relaytype.StateTableName+": ") &&
				strings.Contains(data, "slot_name[text]:'"+b.cfg.Slot+"' "):
				// The relay records its slot's confirmed position, which
				// the heartbeats advance.
			default:
				t.Fatalf("the database saw other writes: %s", data)
			}
		}
		return beat != "", rows.Err()
	})
	testenv.WaitFor(t, 30*time.Second, "confirmed_flush_lsn past heartbeat at "+beat, func() (bool, error) {
		var past bool
		err := b.db.Pool.QueryRow(ctx, `SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
			b.cfg.Slot, beat).Scan(&past)
		return past, err
	})
	if n := b.metric(t, "pgoutbox_relay_events_published_total"); n != 0 {
		t.Fatalf("%v events published from heartbeats", n)
	}
}
