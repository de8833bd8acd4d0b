package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A failover slot waits for the standbys named in the primary's
// synchronized_standby_slots: with one that no standby streams, the
// primary sends the relay nothing (go-pq-cdc#169's stall). relay status
// names that standby slot as a problem and the slot gauge counts it; once
// the setting no longer names it, the row waiting is published and both
// clear. It skips below PG 17.
func TestInactiveSynchronizedStandbyExplainsStall(t *testing.T) {
	t.Parallel()
	b, _ := ownServer(t, func(c *relay.Config) { c.LagPollInterval = 50 * time.Millisecond })
	ctx := context.Background()
	b.needPostgres(t, 17, "synchronized_standby_slots")
	const gauge = "pgoutbox_relay_slot_standby_slots_inactive"
	b.exec(t, `SELECT pg_create_physical_replication_slot('gone_standby', true)`,
		`ALTER SYSTEM SET synchronized_standby_slots = 'gone_standby'`, `SELECT pg_reload_conf()`)
	b.kafka.CreateTopics(t, testenv.DefaultPartitions, "outbox.order")
	run := b.start(t)
	waiting := b.insert(t, msg("w", 1))
	testenv.WaitFor(t, time.Minute, "relay status and the gauge to name the inactive standby slot", func() (bool, error) {
		st, err := relay.Status(ctx, b.cfg)
		if err != nil {
			return false, err
		}
		named := slices.Equal(st.InactiveStandbySlots, []string{"gone_standby"}) &&
			slices.ContainsFunc(st.Problems, func(p string) bool { return strings.Contains(p, "synchronized_standby_slots") })
		return named && b.metric(t, gauge) == 1, nil
	})
	// The stall itself: the server withholds what the standby has not
	// confirmed.
	if recs := testenv.MustReadTopic(t, b.kafka.Brokers, "outbox.order"); missingIDs(recs, waiting) != len(waiting) {
		t.Fatalf("the row reached Kafka while synchronized_standby_slots named a slot no standby streams")
	}
	b.exec(t, `ALTER SYSTEM RESET synchronized_standby_slots`, `SELECT pg_reload_conf()`)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", waiting, time.Minute)
	testenv.WaitFor(t, time.Minute, "the gauge to clear", func() (bool, error) { return b.metric(t, gauge) == 0, nil })
	st, err := relay.Status(ctx, b.cfg)
	if err != nil || len(st.InactiveStandbySlots) != 0 {
		t.Fatalf("relay status after the setting was reset: %v, %+v", err, st)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}
