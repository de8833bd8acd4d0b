package inbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// RefreshMetrics's query reads the unfinished rows through their partial
// index, not the consumer's million COMPLETED rows. The plan and the time
// are printed (go test -v -run TestRefreshMetricsOnAMillionCompletedRows); no timed
// assertion.
func TestRefreshMetricsOnAMillionCompletedRows(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 1,000,000 rows")
	}
	t.Parallel()
	db, in := migrated(t, "billing")
	ctx := context.Background()
	start := time.Now()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, business_key, payload_hash, status, attempts,
			received_at, updated_at, completed_at)
		SELECT 'billing', 'm-' || i, 'k-' || i, '\x00', 'COMPLETED', 1,
			now() - (1000000 - i) * interval '100 ms', now(), now() - (1000000 - i) * interval '100 ms'
		FROM generate_series(1, 1000000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, business_key, payload_hash, status, attempts,
			locked_until, received_at)
		VALUES ('billing', 'r-1', 'rk-1', '\x00', 'FAILED_RETRYABLE', 2, NULL, now() - interval '1 hour'),
		       ('billing', 'r-2', 'rk-2', '\x00', 'FAILED_RETRYABLE', 1, NULL, now() - interval '1 minute'),
		       ('billing', 'p-1', 'pk-1', '\x00', 'PROCESSING', 1, now() - interval '1 minute', now() - interval '2 minutes'),
		       ('billing', 'f-1', 'fk-1', '\x00', 'FAILED_FINAL', 5, NULL, now() - interval '2 days'),
		       ('other', 'p-1', 'pk-1', '\x00', 'PROCESSING', 1, now() - interval '1 minute', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE inbox`); err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000,000 COMPLETED rows inserted and analyzed in %v", time.Since(start).Round(time.Millisecond))

	rows, err := db.Pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+onTable(in.table, unfinishedQuery), "billing")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	t.Logf("RefreshMetrics query plan:\n%s", plan)
	if !strings.Contains(plan, "inbox_unfinished_idx") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("the RefreshMetrics query does not read through inbox_unfinished_idx:\n%s", plan)
	}
	start = time.Now()
	counts, err := in.refresh(ctx)
	t.Logf("Inbox.RefreshMetrics took %v", time.Since(start).Round(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	got := map[Status]StatusCount{}
	for _, c := range counts {
		got[c.Status] = c
	}
	if len(counts) != 3 || got[StatusFailedRetryable].Count != 2 || got[StatusProcessing].Stuck != 1 || got[StatusFailedFinal].Count != 1 {
		t.Fatalf("refresh %+v", counts)
	}
	if v := testutil.ToFloat64(in.metrics.oldestUnfinished); v < 3600 || v > 3600+600 {
		t.Fatalf("oldest unfinished %v s, want about an hour", v)
	}
	start = time.Now()
	exact, err := (&Store{table: in.table, q: in.admin}).Counts(ctx, "billing")
	t.Logf("exact Store.Counts (inbox status) took %v", time.Since(start).Round(time.Microsecond))
	if err != nil || len(exact) != 4 || exact[1].Status != StatusCompleted || exact[1].Count != 1000000 {
		t.Fatalf("exact status %+v, %v", exact, err)
	}
}
