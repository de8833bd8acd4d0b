package inbox_test

import (
	"context"
	"os"
	"slices"
	"strings"
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
	for _, table := range []string{"", "ops.Inbox-2", "ops.O'Brien"} {
		got, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), table)
		if err != nil || !slices.Equal(got, []int{1, 2, 3, 4}) {
			t.Fatalf("Migrate(%q) = %v, %v", table, got, err)
		}
		if got, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), table); err != nil || len(got) != 0 {
			t.Fatalf("second Migrate(%q) = %v, %v", table, got, err)
		}
	}
	// Every constraint and index the SQL files declare is named after its
	// table: as many as public.inbox has, none left with the default name.
	var named, def int
	if err := db.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE conrelid = 'ops."Inbox-2"'::regclass AND conname LIKE 'Inbox-2\_%'),
		count(*) FILTER (WHERE conrelid = 'public.inbox'::regclass)
		FROM pg_constraint`).Scan(&named, &def); err != nil || named != def || def < 4 {
		t.Fatalf("constraints named after ops.\"Inbox-2\": %d, public.inbox has %d (%v)", named, def, err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE schemaname = 'ops' AND tablename = 'Inbox-2' AND indexname LIKE 'Inbox-2\_%'),
		count(*) FILTER (WHERE schemaname = 'public' AND tablename = 'inbox')
		FROM pg_indexes`).Scan(&named, &def); err != nil || named != def || def < 5 {
		t.Fatalf("indexes named after ops.\"Inbox-2\": %d, public.inbox has %d (%v)", named, def, err)
	}
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "c", Table: "ops.Inbox-2"})
	if err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: "m", BusinessKey: "k"}
	noop := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", nil }
	if res, err := in.Process(ctx, m, noop); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM ops."Inbox-2"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in custom table: %d, %v", n, err)
	}
	assertKeysBytewise(t, db.Pool, `ops."Inbox-2"`)
	assertKeysBytewise(t, db.Pool, `ops."O'Brien"`)
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
	for _, f := range []string{"001_create_inbox.up.sql", "002_key_collation.up.sql", "003_unfinished_index.up.sql", "004_attempt_reconciliation.up.sql"} {
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
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	assertKeysBytewise(t, db.Pool, "public.inbox")
}

// An inbox created by the first migration alone on a database with a
// linguistic default collation, with rows in it, is upgraded in place: the
// keys compare byte by byte, and a redelivery of a message recorded before
// the upgrade is still a duplicate. A nondeterministic collation someone
// chose on purpose is left alone.
func TestMigrateUpgradesKeyCollation(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	script, err := os.ReadFile("../../sql/inbox/001_create_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	// The columns this version of the library writes (migration 004).
	columns, err := os.ReadFile("../../sql/inbox/004_attempt_reconciliation.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	script = append(append(script, ";\n"...), columns...)
	// The test server's default collation is C: give the columns what a
	// default en_US.UTF-8 database would, and one a case-insensitive
	// collation.
	var linguistic string
	err = db.Pool.QueryRow(ctx, `SELECT quote_ident(collname) FROM pg_collation
		WHERE collisdeterministic AND collprovider IN ('c', 'i') AND collname NOT IN ('C', 'POSIX', 'ucs_basic')
		ORDER BY collprovider = 'c' DESC, collname LIMIT 1`).Scan(&linguistic)
	if err != nil {
		t.Fatal("no linguistic collation on the server:", err)
	}
	_, err = db.Pool.Exec(ctx, string(script)+`;
		CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
		ALTER TABLE inbox ALTER COLUMN consumer TYPE text COLLATE `+linguistic+`,
			ALTER COLUMN message_id TYPE text COLLATE `+linguistic+`,
			ALTER COLUMN business_key TYPE text COLLATE ci;
		CREATE TABLE inbox2 (LIKE inbox INCLUDING ALL);
		ALTER TABLE inbox2 ALTER COLUMN business_key TYPE text COLLATE `+linguistic)
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "billing", Table: "inbox2"})
	if err != nil {
		t.Fatal(err)
	}
	effects := 0
	handler := func(context.Context, pgx.Tx, inbox.Message) (string, error) { effects++; return "", nil }
	m := inbox.Message{ID: "m-1", BusinessKey: "order-1:charge", Payload: []byte(`{"amount":1}`)}
	if res, err := in.Process(ctx, m, handler); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	for _, table := range []string{"", "inbox2"} {
		if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), table); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := keyCollations(t, db.Pool, "inbox"), []string{"business_key ci", `consumer "C"`, `message_id "C"`}; !slices.Equal(got, want) {
		t.Fatalf("inbox key collations %q, want %q", got, want)
	}
	if got, want := keyCollations(t, db.Pool, "inbox2"), []string{`business_key "C"`, `consumer "C"`, `message_id "C"`}; !slices.Equal(got, want) {
		t.Fatalf("inbox2 key collations %q, want %q", got, want)
	}
	if res, err := in.Process(ctx, m, handler); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("redelivery after the upgrade: %v, %v", res, err)
	}
	if effects != 1 {
		t.Fatalf("handler ran %d times, want 1", effects)
	}
}

// keyCollations returns "column collation" for the key columns of table.
func keyCollations(t *testing.T, db *pgxpool.Pool, table string) []string {
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
	return got
}

// assertKeysBytewise checks that the key columns of table compare bytes: "C",
// or the default collation of this C-locale test server.
func assertKeysBytewise(t *testing.T, db *pgxpool.Pool, table string) {
	t.Helper()
	for _, kc := range keyCollations(t, db, table) {
		if _, coll, _ := strings.Cut(kc, " "); coll != `"C"` && coll != `"default"` {
			t.Errorf("%s: %s does not compare bytes", table, kc)
		}
	}
}
