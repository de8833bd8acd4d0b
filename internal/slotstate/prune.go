package slotstate

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// PruneOptions bounds one pruning pass (relay.Config's PruneAfter,
// BackfillMargin and PruneBatchSize).
type PruneOptions struct {
	// After is the age past which a row may be deleted.
	After time.Duration
	// Margin is how far before the last confirmed commit time a recovery
	// starts reading the table: rows of it are kept.
	Margin time.Duration
	// BatchSize is the most rows one DELETE removes.
	BatchSize int
	// Deleted, when set, is called with the count of each DELETE, as it
	// ends.
	Deleted func(n int64)
}

// Prune deletes the outbox rows created before the pruning cutoff, in
// statements of at most o.BatchSize rows, until fewer are left or ctx
// ends; it returns the cutoff and the rows deleted. The cutoff is
// o.After ago, and never later than the state row's confirmed commit time
// (the slot's creation before the first) minus o.Margin, so that a
// recovery finds the rows it needs; it is recorded in the row
// (pruned_before) before anything is deleted, so that Recover refuses,
// naming the range, rather than publish part of it. Without a state table
// (yet) there is no recovery to protect, and the cutoff is o.After ago.
func Prune(ctx context.Context, conn *pgx.Conn, c *Config, o PruneOptions) (cutoff time.Time, total int64, err error) {
	if cutoff, err = pruneCutoff(ctx, conn, c, o); err != nil {
		return cutoff, 0, err
	}
	table, _ := pgname.Parse(c.Table, "public")
	// A row's ctid is unique only within its partition: tableoid tells the
	// partitions of a partitioned outbox apart.
	q := `DELETE FROM ` + table.Sanitize() + ` WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM ` + table.Sanitize() +
		` WHERE ` + pgx.Identifier{tableformat.Shape(c.TableFormat).CreatedAt}.Sanitize() + ` < $1 LIMIT $2)`
	for ctx.Err() == nil {
		tag, err := conn.Exec(ctx, q, cutoff, o.BatchSize)
		if err != nil {
			return cutoff, total, err
		}
		n := tag.RowsAffected()
		total += n
		if o.Deleted != nil {
			o.Deleted(n)
		}
		if n < int64(o.BatchSize) {
			break
		}
	}
	return cutoff, total, nil
}

// pruneCutoff computes Prune's cutoff and records it in the state row.
func pruneCutoff(ctx context.Context, conn *pgx.Conn, c *Config, o PruneOptions) (time.Time, error) {
	state := StateTable(c).Sanitize()
	var cutoff time.Time
	err := conn.QueryRow(ctx, `SELECT least(now() - make_interval(secs => $1),
			(SELECT coalesce(confirmed_commit_time, slot_created_at) FROM `+state+` WHERE slot_name = $2) - make_interval(secs => $3))`,
		o.After.Seconds(), c.Slot, o.Margin.Seconds()).Scan(&cutoff)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no state table (yet): no recovery to protect
		err = conn.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, o.After.Seconds()).Scan(&cutoff)
	} else if err == nil {
		_, err = conn.Exec(ctx, `UPDATE `+state+` SET pruned_before = greatest(pruned_before, $2) WHERE slot_name = $1`, c.Slot, cutoff)
	}
	return cutoff, err
}
