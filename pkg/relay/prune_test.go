package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Pruning deletes rows older than PruneAfter in small batches and keeps
// the rest; deletes are not published. The cutoff, the margin kept for a
// recovery and partitioned tables are tested in internal/slotstate
// (prune_internal_test.go).
func TestPrune(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.PruneAfter = time.Hour
		c.PruneInterval = 50 * time.Millisecond
		c.PruneBatchSize = 3
	})
	ctx := context.Background()
	ids := b.insert(t, msg("a", 1), msg("a", 2), msg("a", 3), msg("a", 4), msg("a", 5), msg("a", 6), msg("a", 7))
	// Age five of them.
	if _, err := b.db.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`, ids[:5]); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	testenv.WaitFor(t, 30*time.Second, "old rows pruned", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n)
		return n == 2, err
	})
	var left int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[])`, ids[5:]).Scan(&left); err != nil || left != 2 {
		t.Fatalf("recent rows left: %d (%v), want 2", left, err)
	}
	testenv.WaitFor(t, 10*time.Second, "pruned_rows_total", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_pruned_rows_total") == 5, nil
	})
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
}
