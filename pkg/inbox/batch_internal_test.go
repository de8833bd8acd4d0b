package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// migrated is the setup of the tests inside the package: a fresh database
// with the inbox table, and an Inbox on pgx for consumer that logs nowhere.
func migrated(tb testing.TB, consumer string) (*testenv.DB, *Inbox[pgx.Tx]) {
	tb.Helper()
	db := testenv.NewDB(tb)
	if _, err := Migrate(context.Background(), Pgx(db.Pool), ""); err != nil {
		tb.Fatal(err)
	}
	return db, newInbox(tb, Pgx(db.Pool), consumer)
}

// newInbox returns an Inbox on driver for consumer that logs nowhere.
func newInbox[TTx any](tb testing.TB, driver *Driver[TTx], consumer string) *Inbox[TTx] {
	tb.Helper()
	in, err := New(driver, &Config{Consumer: consumer, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// The batch path works on both drivers: one claim statement with array
// parameters, the handlers, one completion. It falls back to one message
// at a time silently, so the consumer loop tests alone cannot tell.
func TestBatchPathOnBothDrivers(t *testing.T) {
	t.Parallel()
	db, in := migrated(t, "batch")
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	batchOn(t, "pgx", in, func(ctx context.Context, tx pgx.Tx, m Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1)`, m.BusinessKey)
		return "ref-" + m.ID, err
	})
	batchOn(t, "database/sql", newInbox(t, SQL(db.SQL), "batch"), func(ctx context.Context, tx *sql.Tx, m Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect VALUES ($1)`, m.BusinessKey)
		return "ref-" + m.ID, err
	})
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE status = 'COMPLETED' AND result_ref LIKE 'ref-%'`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("completed rows with a result reference: %d, %v", n, err)
	}
}

// batchOn runs ten messages and a duplicate through in's batch path, then
// three of them again.
func batchOn[TTx any](t *testing.T, name string, in *Inbox[TTx], handler TxHandler[TTx]) {
	t.Helper()
	ctx := context.Background()
	var msgs []Message
	for i := range 10 {
		id := fmt.Sprintf("%s-%d", name, i)
		msgs = append(msgs, Message{ID: id, BusinessKey: "k-" + id, Payload: []byte(`{}`), Topic: "t", Offset: int64(i)})
	}
	msgs = append(msgs, msgs[3]) // a duplicate within the batch
	results, ok := in.processBatch(ctx, msgs, handler)
	if !ok {
		t.Fatalf("%s: batch rolled back", name)
	}
	for i, r := range results {
		want := Processed
		if i == 10 {
			want = Duplicate
		}
		if r.Outcome != want || r.ResultRef != "ref-"+msgs[i].ID {
			t.Fatalf("%s: result %d: %+v", name, i, r)
		}
	}
	// Again: every message is a duplicate, found through the claim.
	results, ok = in.processBatch(ctx, msgs[:3], handler)
	if !ok || results[0].Outcome != Duplicate || results[2].ResultRef != "ref-"+msgs[2].ID {
		t.Fatalf("%s: second batch %v %+v", name, ok, results)
	}
}

// The consumer loop's periodic RefreshMetrics and purge run on database/sql too.
func TestRefreshMetricsAndPurgeOnDatabaseSQL(t *testing.T) {
	t.Parallel()
	db, in := migrated(t, "c")
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, business_key, payload_hash, status, attempts,
			received_at, updated_at, completed_at)
		SELECT 'c', 'm-' || i, 'k-' || i, '\x00', CASE WHEN i <= 3 THEN 'FAILED_RETRYABLE' ELSE 'COMPLETED' END, 1,
			now() - interval '2 days', now() - interval '2 days', CASE WHEN i > 3 THEN now() - interval '2 days' END
		FROM generate_series(1, 10) AS i`); err != nil {
		t.Fatal(err)
	}
	sin := newInbox(t, SQL(db.SQL), in.Consumer())
	counts, err := sin.refresh(ctx)
	if err != nil || len(counts) != 1 || counts[0].Status != StatusFailedRetryable || counts[0].Count != 3 {
		t.Fatalf("refresh %+v, %v", counts, err)
	}
	n, err := (&Store{table: in.table}).purge(ctx, sin.admin, PurgeParams{Consumer: in.Consumer(), OlderThan: 24 * time.Hour, BatchSize: 4})
	if err != nil || n != 7 {
		t.Fatalf("purged %d, %v; want 7", n, err)
	}
}
