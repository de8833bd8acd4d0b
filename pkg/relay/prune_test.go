package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Pruning deletes rows older than PruneAfter in small batches and keeps
// the rest; deletes are not published.
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

// Pruning a partitioned outbox deletes the old rows of one partition and
// never the rows at the same physical position (ctid) of another.
func TestPrunePartitionedOutbox(t *testing.T) {
	t.Parallel()
	ddl := append(append([]string{}, partitionedOutbox...), `CREATE TABLE outbox_default PARTITION OF outbox DEFAULT`)
	b := setup(t, func(c *relay.Config) {
		c.PruneAfter = time.Hour
		c.PruneInterval = 50 * time.Millisecond
		c.PruneBatchSize = 2
	}, ddl...)
	ctx := context.Background()
	old := insertRows(t, b.db.Pool, "outbox", newRows(0, 4, 2, func(i int) time.Time {
		return time.Date(2026, 1, 15, 0, 0, i, 0, time.UTC)
	}))
	young := insertRows(t, b.db.Pool, "outbox", newRows(4, 6, 2, func(int) time.Time { return time.Now() }))
	b.start(t)
	testenv.WaitFor(t, 30*time.Second, "old rows pruned", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[])`, old).Scan(&n)
		return n == 0, err
	})
	testenv.WaitFor(t, 10*time.Second, "pruned_rows_total", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_pruned_rows_total") >= 4, nil
	})
	var left int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE id = ANY($1::uuid[])`, young).Scan(&left); err != nil || left != len(young) {
		t.Fatalf("young rows left: %d (%v), want %d", left, err, len(young))
	}
	if n := b.metric(t, "pgoutbox_relay_pruned_rows_total"); n != 4 {
		t.Fatalf("pruned %v rows, want 4", n)
	}
}
