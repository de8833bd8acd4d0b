package relay

import (
	"context"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// prune deletes outbox rows older than PruneAfter every PruneInterval, in
// statements of at most PruneBatchSize rows, until ctx ends. Deleting never
// loses an event: the relay reads inserts from the WAL, and the
// publication does not publish deletes. Errors are logged and retried at
// the next pass.
func (r *Relay) prune(ctx context.Context) {
	c := &r.cfg
	table, _ := pgname.Parse(c.Table, "public")
	q := `DELETE FROM ` + table.Sanitize() + ` WHERE ctid IN (SELECT ctid FROM ` + table.Sanitize() +
		` WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)`
	tick := time.NewTicker(c.PruneInterval)
	defer tick.Stop()
	for {
		if err := r.prunePass(ctx, q); err != nil && ctx.Err() == nil {
			c.Logger.Warn("pruning the outbox failed; retrying at the next pass", "error", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (r *Relay) prunePass(ctx context.Context, q string) error {
	c := &r.cfg
	conn, err := connect(ctx, c)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	total := int64(0)
	for ctx.Err() == nil {
		tag, err := conn.Exec(ctx, q, c.PruneAfter.Seconds(), c.PruneBatchSize)
		if err != nil {
			return err
		}
		n := tag.RowsAffected()
		total += n
		r.m.pruned.Add(float64(n))
		if n < int64(c.PruneBatchSize) {
			break
		}
	}
	if total > 0 {
		c.Logger.Info("pruned outbox rows", "rows", total, "older_than", c.PruneAfter)
	}
	return nil
}
