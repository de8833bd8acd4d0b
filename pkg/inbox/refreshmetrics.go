package inbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// unfinishedQuery reads only the rows that are not COMPLETED, through the
// partial index inbox_unfinished_idx (migration 003): with days of
// retention nearly every row is COMPLETED, and those are never read.
const unfinishedQuery = `SELECT status, count(*), min(received_at),
	count(*) FILTER (WHERE status = 'PROCESSING' AND locked_until < now())
	FROM {T} WHERE consumer = $1 AND status <> 'COMPLETED'
	GROUP BY status`

// RefreshMetrics counts this consumer's rows per unfinished status (every
// status but COMPLETED) and sets the gauges pgoutbox_inbox_stuck_processing,
// pgoutbox_inbox_unfinished and pgoutbox_inbox_oldest_unfinished_seconds.
// It reads only those rows, through an index, so it stays cheap on an inbox
// of millions of COMPLETED rows. The consumer loop calls it every
// inboxkafka.Config.MetricsInterval; a consumer loop of your own calls it
// periodically. It runs on the driver's database, in a transaction of its
// own when the handle only begins transactions. For the counts themselves
// use Store.Counts, which counts every status exactly (COMPLETED rows too).
func (in *Inbox[TTx]) RefreshMetrics(ctx context.Context) error {
	_, err := in.refresh(ctx)
	return err
}

// refresh is RefreshMetrics; it returns the counts it read, in
// state-machine order.
func (in *core) refresh(ctx context.Context) ([]StatusCount, error) {
	if in.admin != nil {
		return in.readUnfinished(ctx, in.admin)
	}
	var counts []StatusCount
	err := dbdriver.BeginFunc(ctx, in.db, func(tx dbdriver.Tx) error {
		var err error
		counts, err = in.readUnfinished(ctx, tx)
		return err
	})
	return counts, err
}

// readUnfinished reads the counts on q and sets the gauges.
func (in *core) readUnfinished(ctx context.Context, q dbdriver.Querier) ([]StatusCount, error) {
	rows, err := q.Query(ctx, onTable(in.table, unfinishedQuery), in.cfg.Consumer)
	counts, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (StatusCount, error) {
		c := StatusCount{Consumer: in.cfg.Consumer}
		err := r.Scan(&c.Status, &c.Count, &c.Oldest, &c.Stuck)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("inbox: refresh metrics: %w", err)
	}
	slices.SortFunc(counts, func(a, b StatusCount) int {
		return slices.Index(statuses[:], a.Status) - slices.Index(statuses[:], b.Status)
	})
	var (
		stuck  int64
		oldest time.Time
	)
	seen := map[Status]bool{}
	for _, c := range counts {
		stuck += c.Stuck
		seen[c.Status] = true
		in.metrics.unfinished.WithLabelValues(string(c.Status)).Set(float64(c.Count))
		if c.Status != StatusFailedFinal && (oldest.IsZero() || c.Oldest.Before(oldest)) {
			oldest = c.Oldest
		}
	}
	for _, st := range statuses {
		if st != StatusCompleted && !seen[st] {
			in.metrics.unfinished.WithLabelValues(string(st)).Set(0)
		}
	}
	in.metrics.stuck.Set(float64(stuck))
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	in.metrics.oldestUnfinished.Set(age)
	return counts, nil
}
