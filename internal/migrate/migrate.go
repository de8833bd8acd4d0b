package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads the NNN_name.up.sql files of dir in fsys, sorted by version.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", dir, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".up.sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: name must start with a positive number and '_'", dir, name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", out[i-1].Name, out[i].Name, out[i].Version)
		}
	}
	return out, nil
}

// Table applies the migrations of component (its folder in
// pgoutbox.Migrations: sql/outbox, sql/inbox) to the table name, "table" or
// "schema.table" (schema public when omitted): the shared body of
// outbox.Migrate and inbox.Migrate, with the names of Names.
func Table(ctx context.Context, db dbdriver.DB, component, name string) ([]int, error) {
	table, err := pgname.Parse(name, "public")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", component, err)
	}
	migrations, err := Load(pgoutbox.Migrations, component)
	if err != nil {
		return nil, err
	}
	return Apply(ctx, db, component, table.String(), migrations, Names(component, migrations, table))
}

// Outbox applies the sql/outbox migrations to the outbox table name ("" is
// public.outbox): outbox.Migrate, and relay setup for a table in pgoutbox's
// format.
func Outbox(ctx context.Context, db dbdriver.DB, name string) ([]int, error) {
	return Table(ctx, db, "outbox", cmp.Or(name, "public.outbox"))
}

// declared matches the name of a constraint or an index a migration
// declares (CONSTRAINT name, CREATE [UNIQUE] INDEX [CONCURRENTLY] [IF NOT
// EXISTS] name).
var declared = regexp.MustCompile(`(?i)\b(?:CONSTRAINT|INDEX(?:\s+CONCURRENTLY)?(?:\s+IF\s+NOT\s+EXISTS)?)\s+([a-z_][a-z0-9_]*)`)

// schemaObjects are the objects of component's migrations that are not
// named after the table but live in its schema: public.X becomes
// "schema"."X".
var schemaObjects = map[string][]string{
	"outbox": {"pgoutbox_uuidv7", StateTable},
}

// Names rewrites the default names of component's migrations for table,
// reading them from the SQL itself, so a constraint or an index a new
// migration declares needs no list kept beside it: public.<component> (also
// as the string literal 'public.<component>', its quotes doubled) becomes
// the table; every constraint and index the migrations declare as
// <component>_<suffix> becomes "<table name>_<suffix>" (quoted, so a name
// with a quote stays one identifier); the schema objects of
// schemaObjects move to the table's schema.
func Names(component string, migrations []Migration, table pgname.Table) *strings.Replacer {
	quoted := func(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
	def := "public." + component
	// The literal comes first: it starts one character earlier, and a
	// Replacer tries the pairs in argument order at each position.
	pairs := []string{"'" + def + "'", "'" + strings.ReplaceAll(table.Sanitize(), "'", "''") + "'", def, table.Sanitize()}
	for _, o := range schemaObjects[component] {
		pairs = append(pairs, "public."+o, pgx.Identifier{table.Schema, o}.Sanitize())
	}
	seen := map[string]bool{}
	for _, m := range migrations {
		for _, d := range declared.FindAllStringSubmatch(m.SQL, -1) {
			name := strings.ToLower(d[1])
			suffix, ok := strings.CutPrefix(name, component+"_")
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			pairs = append(pairs, name, quoted(table.Name+"_"+suffix))
		}
	}
	return strings.NewReplacer(pairs...)
}

// RelayState creates the relay state table of the outbox table name (the
// sql/outbox migration of the state table alone), for an outbox table
// pgoutbox does not create: a Debezium-shaped one. Its bookkeeping
// component is "relay-state".
func RelayState(ctx context.Context, db dbdriver.DB, name string) error {
	table, err := pgname.Parse(name, "public")
	if err != nil {
		return fmt.Errorf("relay state: %w", err)
	}
	all, err := Load(pgoutbox.Migrations, "outbox")
	if err != nil {
		return err
	}
	var state []Migration
	for _, m := range all {
		if strings.HasSuffix(m.Name, "_relay_state.up.sql") {
			state = append(state, m)
		}
	}
	if len(state) == 0 {
		return errors.New("relay state: no relay state migration in sql/outbox")
	}
	_, err = Apply(ctx, db, "relay-state", table.String(), state, Names("outbox", all, table))
	return err
}

// lockKey is the advisory lock every migration transaction takes first.
const lockKey = 0x7067_6f75_7462 // "pgoutb"

// Apply runs, in one transaction, every migration of component not yet
// recorded for target ("schema.table"), in version order; gaps in the
// numbering are fine. The record is the table pgoutbox_migration in the
// target's schema, so a role with CREATE on that schema only needs no
// rights on public. replace rewrites default names in the SQL text (for
// example public.outbox to the configured table). It returns the versions it
// applied, in order.
func Apply(ctx context.Context, db dbdriver.DB, component, target string, migrations []Migration, replace *strings.Replacer) ([]int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: begin: %w", component, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
		return nil, fmt.Errorf("migrate %s: lock: %w", component, err)
	}
	book, err := bookkeeping(ctx, tx, target)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", component, err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM `+book+` WHERE component = $1 AND target = $2`, component, target)
	done, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (v int32, err error) {
		err = r.Scan(&v)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate %s: read applied versions: %w", component, err)
	}
	applied := make(map[int]bool, len(done))
	for _, v := range done {
		applied[int(v)] = true
	}
	var ran []int
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		sql := m.SQL
		if replace != nil {
			sql = replace.Replace(sql)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("migrate %s %s for %s: %w", component, m.Name, target, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+book+` (component, target, version, name) VALUES ($1, $2, $3, $4)`,
			component, target, m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("migrate %s: record %s: %w", component, m.Name, err)
		}
		ran = append(ran, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate %s: commit: %w", component, err)
	}
	return ran, nil
}

// The tables the relay keeps beside the outbox, in its schema: the
// migration bookkeeping (also in public, where earlier releases kept it)
// and the relay's state.
const (
	BookkeepingTable = "pgoutbox_migration"
	StateTable       = "pgoutbox_relay_state"
)

// RelayTables are the relay's own tables beside the outbox table: a
// publication of all tables publishes their rows too, which the relay
// skips rather than dead-letters.
func RelayTables(table pgname.Table) []pgname.Table {
	return []pgname.Table{
		{Schema: table.Schema, Name: BookkeepingTable},
		{Schema: "public", Name: BookkeepingTable},
		{Schema: table.Schema, Name: StateTable},
	}
}

// bookkeeping returns the quoted name of the pgoutbox_migration table in
// target's schema, creating it when missing. Its CREATE runs only when the
// table does not exist: CREATE TABLE IF NOT EXISTS checks the schema's
// CREATE right even when the table is there. A new table in another schema
// than public takes over the versions that earlier releases recorded for
// target in public.pgoutbox_migration.
func bookkeeping(ctx context.Context, tx dbdriver.Tx, target string) (string, error) {
	t, err := pgname.Parse(target, "public")
	if err != nil {
		return "", err
	}
	book := pgname.Table{Schema: t.Schema, Name: BookkeepingTable}
	var exists, legacy bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass('public.pgoutbox_migration') IS NOT NULL`,
		book.Sanitize()).Scan(&exists, &legacy); err != nil {
		return "", fmt.Errorf("look up bookkeeping table: %w", err)
	}
	if exists {
		return book.Sanitize(), nil
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE `+book.Sanitize()+` (
		component  text        NOT NULL,
		target     text        NOT NULL,
		version    integer     NOT NULL,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (component, target, version))`); err != nil {
		return "", fmt.Errorf("create bookkeeping table %s: %w", book, err)
	}
	if legacy && t.Schema != "public" {
		if _, err := tx.Exec(ctx, `INSERT INTO `+book.Sanitize()+` (component, target, version, name, applied_at)
			SELECT component, target, version, name, applied_at FROM public.pgoutbox_migration
			WHERE target = $1 ON CONFLICT DO NOTHING`, target); err != nil {
			return "", fmt.Errorf("copy versions from public.pgoutbox_migration: %w", err)
		}
	}
	return book.Sanitize(), nil
}
