package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pgoutbox/pgoutbox"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/migrate"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithDatabase(m) }

// Load reads a folder's NNN_*.up.sql files in version order, passing
// over others, and refuses a name without a version or two files of one
// version.
func TestLoad(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	good := fstest.MapFS{
		"c/010_ten.up.sql": file("ten"),
		"c/2_two.up.sql":   file("two"),
		"c/2_two.down.sql": file("down"),
		"c/README.md":      file("readme"),
		"c/sub/3_x.up.sql": file("nested"),
		"other/1_a.up.sql": file("other"),
		"c/001_one.up.sql": file("one"),
	}
	got, err := migrate.Load(good, "c")
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, m := range got {
		desc = append(desc, m.Name+"="+m.SQL)
	}
	if want := "001_one.up.sql=one 2_two.up.sql=two 010_ten.up.sql=ten"; strings.Join(desc, " ") != want || got[2].Version != 10 {
		t.Errorf("Load = %v, want %s (versions 1, 2, 10)", got, want)
	}

	for _, tc := range []struct{ name, file, err string }{
		{"no number", "x_add.up.sql", "must start with a positive number"},
		{"zero", "0_add.up.sql", "must start with a positive number"},
		{"no underscore", "7.up.sql", "must start with a positive number"},
		{"same version", "01_again.up.sql", "share version 1"},
	} {
		fsys := fstest.MapFS{"c/1_first.up.sql": file("x"), "c/" + tc.file: file("y")}
		if _, err := migrate.Load(fsys, "c"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: Load error %v, want one saying %q", tc.name, err, tc.err)
		}
	}
	if _, err := migrate.Load(good, "missing"); err == nil {
		t.Error("Load of a missing folder: no error")
	}
}

// Names points the outbox migrations' names at another table: the
// table, its schema's helper function and state table, and an index named
// after the table (quoted, so a name with a quote stays one identifier),
// read from the migrations' SQL.
func TestOutboxNames(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Load(pgoutbox.Migrations, "outbox")
	if err != nil {
		t.Fatal(err)
	}
	r := migrate.Names("outbox", ms, pgname.Table{Schema: "app", Name: `my"box`})
	in := "CREATE TABLE public.outbox; CREATE INDEX outbox_created_at_idx; SELECT public.pgoutbox_uuidv7(); TABLE public.pgoutbox_relay_state"
	want := `CREATE TABLE "app"."my""box"; CREATE INDEX "my""box_created_at_idx"; SELECT "app"."pgoutbox_uuidv7"(); TABLE "app"."pgoutbox_relay_state"`
	if got := r.Replace(in); got != want {
		t.Errorf("replaced\n%s\nwant\n%s", got, want)
	}
}

// Names finds the constraints and indexes a migration declares, in every
// spelling, and renames only those of the component: a new constraint in
// an SQL file needs no list kept in Go.
func TestNamesReadsDeclarations(t *testing.T) {
	t.Parallel()
	ms := []migrate.Migration{{SQL: `CREATE TABLE public.inbox (a int, CONSTRAINT inbox_a_check CHECK (a > 0));
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_a_idx ON public.inbox (a);
create index inbox_b_idx on public.inbox (a);
ALTER TABLE public.inbox ADD CONSTRAINT other_c_check CHECK (a < 9);
DO $inbox_002$ BEGIN PERFORM 'public.inbox'::regclass; END $inbox_002$;`}}
	got := migrate.Names("inbox", ms, pgname.Table{Schema: "s", Name: "box"}).Replace(ms[0].SQL)
	want := `CREATE TABLE "s"."box" (a int, CONSTRAINT "box_a_check" CHECK (a > 0));
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "box_a_idx" ON "s"."box" (a);
create index "box_b_idx" on "s"."box" (a);
ALTER TABLE "s"."box" ADD CONSTRAINT other_c_check CHECK (a < 9);
DO $inbox_002$ BEGIN PERFORM '"s"."box"'::regclass; END $inbox_002$;`
	if got != want {
		t.Errorf("replaced\n%s\nwant\n%s", got, want)
	}
}

// step is test migration v: version 1 creates the table, the others
// insert a row (id v) or run sql.
func step(v int, sql ...string) migrate.Migration {
	m := migrate.Migration{Version: v, Name: fmt.Sprintf("%d_step.up.sql", v), SQL: fmt.Sprintf(`INSERT INTO public.outbox VALUES (%d)`, v)}
	if v == 1 {
		m.SQL = `CREATE TABLE public.outbox (id int)`
	}
	if len(sql) > 0 {
		m.SQL = sql[0]
	}
	return m
}

// applyToApp returns a fresh database and a function applying migrations
// of component "test" to its table app.box.
func applyToApp(t *testing.T) (*testenv.DB, func(ms ...migrate.Migration) ([]int, error)) {
	db := testenv.NewDB(t)
	names := migrate.Names("outbox", nil, pgname.Table{Schema: "app", Name: "box"})
	return db, func(ms ...migrate.Migration) ([]int, error) {
		return migrate.Apply(context.Background(), dbdriver.PgxDB(db.Pool), "test", "app.box", ms, names)
	}
}

// Apply runs the migrations a target lacks, in one transaction, and
// records them in the target schema's bookkeeping table: a second Apply
// runs nothing, a new migration runs alone, and a failing one leaves
// nothing behind, not even the ones before it in the same call.
func TestApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, apply := applyToApp(t)
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA app`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		steps []migrate.Migration
		ran   string
	}{
		{[]migrate.Migration{step(1), step(2)}, "[1 2]"},
		{[]migrate.Migration{step(1), step(2)}, "[]"},
		{[]migrate.Migration{step(1), step(2), step(3)}, "[3]"},
		{[]migrate.Migration{step(1), step(2), step(3), step(4), step(5, `INSERT INTO public.outbox VALUES ('x')`)}, "error: 5_step.up.sql"},
	} {
		ran, err := apply(tc.steps...)
		got := fmt.Sprint(ran)
		if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(tc.ran, "error: ")) {
			got = tc.ran // the failing step named
		} else if err != nil {
			got = err.Error()
		}
		if got != tc.ran {
			t.Fatalf("Apply of %d steps ran %s, want %s", len(tc.steps), got, tc.ran)
		}
	}
	var sum, n int
	if err := db.Pool.QueryRow(ctx, `SELECT sum(id) FROM app.box`).Scan(&sum); err != nil || sum != 5 {
		t.Errorf("app.box sum(id) = %d, %v; want 5 (rows 2 and 3, not 4)", sum, err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM app.pgoutbox_migration WHERE component = 'test' AND target = 'app.box'`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d versions recorded, %v; want 3", n, err)
	}
}

// A bookkeeping table new in a schema other than public takes over the
// versions earlier releases recorded for its target in
// public.pgoutbox_migration: they do not run again.
func TestApplyTakesOverPublicBookkeeping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, apply := applyToApp(t)
	// An earlier release: the table in app, its version in public.
	if _, err := migrate.Apply(ctx, dbdriver.PgxDB(db.Pool), "other", "public.x", nil, nil); err != nil { // creates public.pgoutbox_migration
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app.box (id int);
		INSERT INTO public.pgoutbox_migration (component, target, version, name) VALUES ('test', 'app.box', 1, '1_step.up.sql')`); err != nil {
		t.Fatal(err)
	}
	if ran, err := apply(step(1), step(2)); err != nil || fmt.Sprint(ran) != "[2]" {
		t.Fatalf("Apply ran %v, %v; want [2] (1 taken over from public)", ran, err)
	}
}
