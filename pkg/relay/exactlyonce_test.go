package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// In exactly-once mode every row arrives once for a read_committed reader
// (kcat's default) across a restart of the relay.
func TestExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.ExactlyOnce = true })
	run := b.start(t)
	var ids []string
	for i := range 20 {
		ids = append(ids, b.insert(t, msg(fmt.Sprintf("agg-%d", i%3), i))...)
	}
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	b.start(t)
	var more []outbox.Message
	for i := range 10 {
		more = append(more, msg(fmt.Sprintf("agg-%d", i%3), 100+i))
	}
	ids = append(ids, b.insert(t, more...)...)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d rows", len(recs), len(ids))
	}
}

// An exactly-once relay outlives a database outage longer than its
// liveness bound: each session starts its liveness clock before it fences
// the slot's older relays, whose Kafka dials the clock guards. With the
// last session's silence on the clock, every dial was refused, for ever.
func TestExactlyOnceOutlivesOutage(t *testing.T) {
	t.Parallel()
	b, srv := ownServerOn(t, testenv.NewBroker(t), func(c *relay.Config) {
		c.ExactlyOnce = true
		c.MaxRetryBackoff = 200 * time.Millisecond
		// A liveness bound of 1 s (wal_sender_timeout / 2).
		c.DatabaseURL = testenv.WithSenderTimeout(t, c.DatabaseURL, 2*time.Second)
	})
	b.start(t)
	ids := b.insert(t, msg("agg-0", 0))
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	srv.Kill()
	time.Sleep(3 * time.Second) // the outage: three liveness bounds
	if err := srv.Restart(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, b.insertRetry(t, msg("agg-0", 1))...)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d rows", len(recs), len(ids))
	}
}
