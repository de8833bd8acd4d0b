package relay

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// prune deletes outbox rows older than PruneAfter every PruneInterval, in
// statements of at most PruneBatchSize rows, until ctx ends. Deleting never
// loses an event: the relay reads inserts from the WAL, and the
// publication does not publish deletes. Errors are logged and retried at
// the next pass.
//
// Rows a recovery could still need are kept: the cutoff is never later
// than the recorded confirmed commit time minus BackfillMargin, and it is
// recorded in the state row (pruned_before) before anything is deleted, so
// that Recover refuses, naming the range, rather than publish part of it.
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

func (r *Relay) prunePass(ctx context.Context) error {
	c := &r.cfg
	table, _ := pgname.Parse(c.Table, "public")
	state := slotstate.StateTable(r.stage.slot).Sanitize()
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var cutoff time.Time
	err = conn.QueryRow(ctx, `SELECT least(now() - make_interval(secs => $1),
			(SELECT coalesce(confirmed_commit_time, slot_created_at) FROM `+state+` WHERE slot_name = $2) - make_interval(secs => $3))`,
		c.PruneAfter.Seconds(), c.Slot, c.BackfillMargin.Seconds()).Scan(&cutoff)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no state table (yet): no recovery to protect
		err = conn.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, c.PruneAfter.Seconds()).Scan(&cutoff)
	} else if err == nil {
		_, err = conn.Exec(ctx, `UPDATE `+state+` SET pruned_before = greatest(pruned_before, $2) WHERE slot_name = $1`, c.Slot, cutoff)
	}
	if err != nil {
		return err
	}
	// A row's ctid is unique only within its partition: tableoid tells the
	// partitions of a partitioned outbox apart.
	q := `DELETE FROM ` + table.Sanitize() + ` WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM ` + table.Sanitize() +
		` WHERE ` + pgx.Identifier{tableformat.Shape(c.TableFormat).CreatedAt}.Sanitize() + ` < $1 LIMIT $2)`
	total := int64(0)
	for ctx.Err() == nil {
		tag, err := conn.Exec(ctx, q, cutoff, c.PruneBatchSize)
		if err != nil {
			return err
		}
		n := tag.RowsAffected()
		total += n
		r.m.Pruned.Add(float64(n))
		if n < int64(c.PruneBatchSize) {
			break
		}
	}
	if total > 0 {
		c.Logger.Info("pruned outbox rows", "rows", total, "older_than", c.PruneAfter, "created_before", cutoff)
	}
	return nil
}
