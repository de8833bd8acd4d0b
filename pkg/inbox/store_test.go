package inbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Migrate and the Store take the driver an Inbox takes, and do the same on
// pgx and on database/sql.
func TestMigrateAndStoreOnBothDrivers(t *testing.T) {
	t.Parallel()
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		db := testenv.NewDB(t)
		migrateAndStore(t, db, inbox.Pgx(db.Pool))
	})
	t.Run("database/sql", func(t *testing.T) {
		t.Parallel()
		db := testenv.NewDB(t)
		migrateAndStore(t, db, inbox.SQL(db.SQL))
	})
}

func migrateAndStore[TTx any](t *testing.T, db *testenv.DB, driver *inbox.Driver[TTx]) {
	ctx := context.Background()
	if got, err := inbox.Migrate(ctx, driver, "ops.box"); err == nil {
		t.Fatalf("Migrate into a missing schema applied %v", got)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA ops`); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]int{{1, 2, 3, 4}, nil} {
		if got, err := inbox.Migrate(ctx, driver, "ops.box"); err != nil || !slices.Equal(got, want) {
			t.Fatalf("Migrate: %v, %v; want %v", got, err, want)
		}
	}
	in, err := inbox.New(driver, &inbox.Config{Consumer: "c", Table: "ops.box"})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, TTx, inbox.Message) (string, error) { return "ref", nil }
	fail := func(context.Context, TTx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("no"))
	}
	if res, err := in.Process(ctx, inbox.Message{ID: "m-1", BusinessKey: "k-1"}, noop); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	if res, err := in.Process(ctx, inbox.Message{ID: "m-2", BusinessKey: "k-2"}, fail); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatal(res, err)
	}

	s, err := inbox.NewStore(driver, "ops.box")
	if err != nil {
		t.Fatal(err)
	}
	counts, err := s.Counts(ctx, "")
	if err != nil || len(counts) != 2 || counts[0].Status != inbox.StatusCompleted || counts[1].Status != inbox.StatusFailedFinal {
		t.Fatalf("Counts: %+v, %v", counts, err)
	}
	if has, err := s.HasRows(ctx, "c"); err != nil || !has {
		t.Fatalf("HasRows(c): %v, %v", has, err)
	}
	if has, err := s.HasRows(ctx, "other"); err != nil || has {
		t.Fatalf("HasRows(other): %v, %v", has, err)
	}
	recs, err := s.List(ctx, inbox.ListParams{Status: inbox.StatusFailedFinal})
	if err != nil || len(recs) != 1 || recs[0].MessageID != "m-2" || recs[0].LastError == "" {
		t.Fatalf("List: %+v, %v", recs, err)
	}
	if n, err := s.Revive(ctx, inbox.ReviveParams{Consumer: "c"}); err != nil || n != 1 {
		t.Fatalf("Revive: %d, %v", n, err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE ops.box SET completed_at = now() - interval '2 days' WHERE status = 'COMPLETED'`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, inbox.PurgeParams{OlderThan: 24 * time.Hour}); err != nil || n != 1 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	if counts, err := s.Counts(ctx, "c"); err != nil || len(counts) != 1 || counts[0].Status != inbox.StatusFailedRetryable {
		t.Fatalf("Counts after revive and purge: %+v, %v", counts, err)
	}
	// Rows of other statuses age from their last update.
	retryable := inbox.PurgeParams{Status: inbox.StatusFailedRetryable, OlderThan: 24 * time.Hour}
	if n, err := s.Purge(ctx, retryable); err != nil || n != 0 {
		t.Fatalf("Purge of a row updated now: %d, %v; want 0", n, err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE ops.box SET updated_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, retryable); err != nil || n != 1 {
		t.Fatalf("Purge of a row updated 2 days ago: %d, %v; want 1", n, err)
	}
}

// The Store refuses a handle it cannot run single statements on, and the
// driver's own refusals.
func TestNewStoreRefuses(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	if _, err := inbox.NewStore(inbox.Pgx(beginOnly{db.Pool}), ""); err == nil {
		t.Error("NewStore on a bare Beginner succeeded")
	}
	tx, err := db.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // test cleanup
	if _, err := inbox.NewStore(inbox.Pgx(tx), ""); !errors.Is(err, inbox.ErrTxNotAllowed) {
		t.Errorf("NewStore(Pgx(tx)): %v, want ErrTxNotAllowed", err)
	}
	if _, err := inbox.Migrate(context.Background(), inbox.SQL(nil), ""); err == nil {
		t.Error("Migrate(SQL(nil)) succeeded")
	}
}

// beginOnly is a Beginner and nothing else.
type beginOnly struct{ db inbox.Beginner }

func (b beginOnly) Begin(ctx context.Context) (pgx.Tx, error) { return b.db.Begin(ctx) }
