package inbox_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

func TestMigrateCustomTableIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA ops`); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"", "ops.Inbox-2"} {
		got, err := inbox.Migrate(ctx, db.Pool, table)
		if err != nil || !slices.Equal(got, []int{1}) {
			t.Fatalf("Migrate(%q) = %v, %v", table, got, err)
		}
		if got, err := inbox.Migrate(ctx, db.Pool, table); err != nil || len(got) != 0 {
			t.Fatalf("second Migrate(%q) = %v, %v", table, got, err)
		}
	}
	in, err := inbox.New(&inbox.Config{Consumer: "c", Table: "ops.Inbox-2"})
	if err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: "m", BusinessKey: "k"}
	noop := func(context.Context, pgx.Tx) (string, error) { return "", nil }
	if res, err := in.Process(ctx, db.Pool, m, noop); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM ops."Inbox-2"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in custom table: %d, %v", n, err)
	}
	// The CHECK constraint guards the state machine.
	if _, err := db.Pool.Exec(ctx, `UPDATE ops."Inbox-2" SET status = 'DONE'`); err == nil {
		t.Fatal("status outside the state machine accepted")
	}
}

// The SQL file is what a DBA runs with psql -f: it applies as one script, and
// Migrate afterwards is harmless.
func TestMigrationFileAppliesAsIs(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	script, err := os.ReadFile("../../sql/inbox/001_create_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // IF NOT EXISTS throughout: a second run is a no-op
		if _, err := db.Pool.Exec(ctx, string(script)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := inbox.Migrate(ctx, db.Pool, ""); err != nil {
		t.Fatal(err)
	}
}
