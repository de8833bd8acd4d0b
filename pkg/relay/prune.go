package relay

import (
	"context"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
)

// prune deletes outbox rows older than PruneAfter every PruneInterval, in
// statements of at most PruneBatchSize rows, until ctx ends. Deleting never
// loses an event: the relay reads inserts from the WAL, and the
// publication does not publish deletes. Errors are logged and retried at
// the next pass. Rows a recovery could still need are kept
// (slotstate.Prune holds the SQL and says how).
func (r *Relay) prune(ctx context.Context) {
	c := &r.cfg
	tick := time.NewTicker(c.PruneInterval)
	defer tick.Stop()
	for {
		if err := r.prunePass(ctx); err != nil && ctx.Err() == nil {
			c.Logger.Warn("pruning the outbox failed; retrying at the next pass", "error", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// prunePass is one pass of prune: slotstate.Prune on a connection of its
// own, counted in the pruned-rows metric.
func (r *Relay) prunePass(ctx context.Context) error {
	c := &r.cfg
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cutoff, total, err := slotstate.Prune(ctx, conn, r.stage.slot, slotstate.PruneOptions{
		After: c.PruneAfter, Margin: c.BackfillMargin, BatchSize: c.PruneBatchSize,
		Deleted: func(n int64) { r.m.Pruned.Add(float64(n)) },
	})
	if err != nil {
		return err
	}
	if total > 0 {
		c.Logger.Info("pruned outbox rows", "rows", total, "older_than", c.PruneAfter, "created_before", cutoff)
	}
	return nil
}
