package inbox_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
		if err != nil || !slices.Equal(got, []int{1, 2}) {
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
	assertKeysCollateC(t, db.Pool, `ops."Inbox-2"`)
	// The CHECK constraint guards the state machine.
	if _, err := db.Pool.Exec(ctx, `UPDATE ops."Inbox-2" SET status = 'DONE'`); err == nil {
		t.Fatal("status outside the state machine accepted")
	}
}

// The SQL files are what a DBA runs with psql -f: each applies as one
// script, a second run is a no-op, and Migrate afterwards is harmless.
func TestMigrationFilesApplyAsIs(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	for _, f := range []string{"001_create_inbox.up.sql", "002_key_collation.up.sql"} {
		script, err := os.ReadFile("../../sql/inbox/" + f)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := db.Pool.Exec(ctx, string(script)); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	if _, err := inbox.Migrate(ctx, db.Pool, ""); err != nil {
		t.Fatal(err)
	}
	assertKeysCollateC(t, db.Pool, "public.inbox")
}

// An inbox created by the first migration alone, with rows in it, is
// upgraded in place: the keys compare byte by byte, and a redelivery of a
// message recorded before the upgrade is still a duplicate.
func TestMigrateUpgradesKeyCollation(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	script, err := os.ReadFile("../../sql/inbox/001_create_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, string(script)); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(&inbox.Config{Consumer: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	effects := 0
	handler := func(context.Context, pgx.Tx) (string, error) { effects++; return "", nil }
	m := inbox.Message{ID: "m-1", BusinessKey: "order-1:charge", Payload: []byte(`{"amount":1}`)}
	if res, err := in.Process(ctx, db.Pool, m, handler); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	if _, err := inbox.Migrate(ctx, db.Pool, ""); err != nil {
		t.Fatal(err)
	}
	assertKeysCollateC(t, db.Pool, "public.inbox")
	if res, err := in.Process(ctx, db.Pool, m, handler); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("redelivery after the upgrade: %v, %v", res, err)
	}
	if effects != 1 {
		t.Fatalf("handler ran %d times, want 1", effects)
	}
}

// assertKeysCollateC checks that the key columns of table use the "C"
// collation.
func assertKeysCollateC(t *testing.T, db *pgxpool.Pool, table string) {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT attname, attcollation::regcollation::text FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname IN ('consumer', 'message_id', 'business_key') ORDER BY attname`, table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var name, coll string
		err := r.Scan(&name, &coll)
		return name + " " + coll, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`business_key "C"`, `consumer "C"`, `message_id "C"`}
	if !slices.Equal(got, want) {
		t.Fatalf("%s key collations: %q, want %q", table, got, want)
	}
}
