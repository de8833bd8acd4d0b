package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// asRole returns db's URL with another user (the test server trusts every
// local login).
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// createRole creates a login role for t, dropped at cleanup.
func createRole(t *testing.T, db *testenv.DB, name, attrs string, grants ...string) string {
	t.Helper()
	ctx := context.Background()
	role := name + "_" + db.Name
	for _, q := range append([]string{"CREATE ROLE " + pgx.Identifier{role}.Sanitize() + " LOGIN " + attrs}, grants...) {
		q = strings.ReplaceAll(q, "ROLE_", pgx.Identifier{role}.Sanitize())
		q = strings.ReplaceAll(q, "DB_", pgx.Identifier{db.Name}.Sanitize())
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		// The database is dropped after this cleanup runs (LIFO), so first
		// hand over what the role owns.
		ctx := context.Background()
		_, _ = db.Pool.Exec(ctx, "REASSIGN OWNED BY "+pgx.Identifier{role}.Sanitize()+" TO CURRENT_USER")
		_, _ = db.Pool.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		_, _ = db.Pool.Exec(ctx, "DROP ROLE "+pgx.Identifier{role}.Sanitize())
	})
	return role
}

// problems runs Setup and returns the checks that failed.
func setupProblems(t *testing.T, cfg *relay.Config) []relaytype.Problem {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := relay.Setup(ctx, cfg)
	var pe *relaytype.PrerequisitesError
	if !errors.As(err, &pe) || !errors.Is(err, relaytype.ErrPrerequisites) {
		t.Fatalf("Setup: %v, want a PrerequisitesError", err)
	}
	for _, p := range pe.Problems {
		if p.Fix == "" || !strings.Contains(err.Error(), p.Fix) {
			t.Errorf("problem %+v has no fix in the error", p)
		}
	}
	return pe.Problems
}

func checks(ps []relaytype.Problem) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Check)
	}
	return strings.Join(names, ",")
}

// nothingCreated fails t when setup left a table, publication or slot.
func nothingCreated(t *testing.T, db *testenv.DB, table, slot, pub string) {
	t.Helper()
	var tbl, p, s bool
	err := db.Pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $2),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $3)`, table, pub, slot).Scan(&tbl, &p, &s)
	if err != nil {
		t.Fatal(err)
	}
	if tbl || p || s {
		t.Fatalf("setup failed but created: table %v, publication %v, slot %v", tbl, p, s)
	}
}

// A server with wal_level=replica: setup names wal_level with the ALTER
// SYSTEM fix and creates nothing (it used to create the table and the
// publication, then fail on the slot).
func TestSetupChecksWalLevel(t *testing.T) {
	t.Parallel()
	srv := testenv.NewServer(t, "wal_level=replica")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cfg := &relay.Config{DatabaseURL: srv.AdminURL, Slot: "s_wal", Publication: "p_wal", Logger: testLogger(t)}
	ps := setupProblems(t, cfg)
	if checks(ps) != "wal_level" || !strings.Contains(ps[0].Fix, "ALTER SYSTEM SET wal_level = logical") ||
		!strings.Contains(ps[0].Fix, "rds.logical_replication") || !strings.Contains(ps[0].Fix, "cloudsql.logical_decoding") {
		t.Fatalf("problems %+v", ps)
	}
	var tbl, pub bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL, EXISTS (SELECT 1 FROM pg_publication)`).Scan(&tbl, &pub); err != nil {
		t.Fatal(err)
	}
	if tbl || pub {
		t.Fatalf("setup created the table (%v) or a publication (%v) on a server it cannot use", tbl, pub)
	}
}

// A role without REPLICATION and without CREATE anywhere: every problem is
// reported at once, each with its GRANT/ALTER ROLE, and nothing is created.
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	role := createRole(t, db, "plain", "")
	cfg := &relay.Config{DatabaseURL: asRole(t, db.URL, role), Slot: "s_" + db.Name, Publication: "p_plain", Logger: testLogger(t)}
	ps := setupProblems(t, cfg)
	if got := checks(ps); got != "replication role,create,create" {
		t.Fatalf("checks %q, want replication role, create (schema), create (database): %+v", got, ps)
	}
	for i, want := range []string{
		"ALTER ROLE " + pgx.Identifier{role}.Sanitize() + " WITH REPLICATION;",
		"GRANT CREATE ON SCHEMA \"public\" TO " + pgx.Identifier{role}.Sanitize() + ";",
		"GRANT CREATE ON DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " TO " + pgx.Identifier{role}.Sanitize() + ";",
	} {
		if !strings.HasPrefix(ps[i].Fix, want) {
			t.Errorf("fix %d: %q, want %q", i, ps[i].Fix, want)
		}
	}
	nothingCreated(t, db, "public.outbox", cfg.Slot, cfg.Publication)
}

// A table the role does not own cannot be added to a new publication.
func TestSetupChecksTableOwner(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	role := createRole(t, db, "notowner", "REPLICATION", "GRANT CREATE ON DATABASE DB_ TO ROLE_", "GRANT CREATE ON SCHEMA public TO ROLE_")
	if err := relay.Setup(context.Background(), &relay.Config{DatabaseURL: db.URL, Slot: "s_owner_" + db.Name, Publication: "p_first"}); err != nil {
		t.Fatal(err)
	}
	cfg := &relay.Config{DatabaseURL: asRole(t, db.URL, role), Slot: "s2_" + db.Name, Publication: "p_second", Logger: testLogger(t)}
	ps := setupProblems(t, cfg)
	// The state table is the first role's too: the second may not write it.
	if checks(ps) != "table owner,state table" || !strings.HasPrefix(ps[0].Fix, `ALTER TABLE "public"."outbox" OWNER TO `) {
		t.Fatalf("problems %+v", ps)
	}
}

// The least-privilege role of the README: REPLICATION, its own schema, CREATE
// on the database. No right on public is needed: the migration bookkeeping
// lives in the outbox's schema. Setup is idempotent for it, and relay run's
// check passes.
func TestSetupLeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	role := createRole(t, db, "relay", "REPLICATION", "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"CREATE SCHEMA app AUTHORIZATION ROLE_", "GRANT CREATE ON DATABASE DB_ TO ROLE_")
	cfg := &relay.Config{DatabaseURL: asRole(t, db.URL, role), Table: "app.outbox", Slot: "s_" + db.Name, Publication: "p_app", Logger: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 2; i++ {
		if err := relay.Setup(ctx, cfg); err != nil {
			t.Fatalf("setup %d: %v", i+1, err)
		}
	}
	if err := relay.CheckPrerequisites(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var inApp, inPublic bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('app.pgoutbox_migration') IS NOT NULL, to_regclass('public.pgoutbox_migration') IS NOT NULL`).Scan(&inApp, &inPublic); err != nil {
		t.Fatal(err)
	}
	if !inApp || inPublic {
		t.Fatalf("bookkeeping in app: %v, in public: %v; want app only", inApp, inPublic)
	}
	// A plain SQL insert gets its ID from the column default.
	var id string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO app.outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('order', '1', 'order.placed', 'k1', '{}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if id[14] != '7' {
		t.Fatalf("default id %s is not a UUIDv7", id)
	}
}

// A relay role other than the one that ran setup: the check names the rights
// relay run needs once streaming (writing its state row, and reading and
// deleting outbox rows for --on-gap=backfill and --prune-after), each with
// its GRANT, and passes once they are granted.
func TestCheckPrerequisitesRunRights(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := &relay.Config{DatabaseURL: db.URL, Slot: "s_" + db.Name, Publication: "p_rights", Logger: testLogger(t)}
	if err := relay.Setup(ctx, owner); err != nil {
		t.Fatal(err)
	}
	role := createRole(t, db, "runner", "REPLICATION")
	cfg := *owner
	cfg.DatabaseURL = asRole(t, db.URL, role)
	cfg.NoCreate = true
	cfg.OnGap = relay.GapBackfill
	cfg.PruneAfter = time.Hour
	err := relay.CheckPrerequisites(ctx, &cfg)
	var pe *relaytype.PrerequisitesError
	if !errors.As(err, &pe) {
		t.Fatalf("CheckPrerequisites: %v, want a PrerequisitesError", err)
	}
	if got := checks(pe.Problems); got != "state table,table rights,table rights" {
		t.Fatalf("checks %q: %+v", got, pe.Problems)
	}
	for _, p := range pe.Problems {
		if _, err := db.Pool.Exec(ctx, strings.TrimSuffix(p.Fix, ";")); err != nil {
			t.Fatalf("fix %q: %v", p.Fix, err)
		}
	}
	if err := relay.CheckPrerequisites(ctx, &cfg); err != nil {
		t.Fatalf("after the GRANTs: %v", err)
	}
}

// Slot names are cluster-wide: a slot of another database (any plugin)
// takes the name, and setup says so before creating anything, naming
// --slot. It created the table and the publication, then failed.
func TestSetupSlotNameTakenInAnotherDatabase(t *testing.T) {
	t.Parallel()
	other, db := testenv.NewDB(t), testenv.NewDB(t)
	ctx := context.Background()
	slot := "taken_" + db.Name
	for _, plugin := range []string{"pgoutput", "test_decoding"} {
		if _, err := other.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, $2)`, slot, plugin); err != nil {
			t.Fatal(err)
		}
		cfg := &relay.Config{DatabaseURL: db.URL, Slot: slot, Publication: "p_taken", Logger: testLogger(t)}
		ps := setupProblems(t, cfg)
		if got := checks(ps); got != "slot name" {
			t.Fatalf("%s: checks %q, want slot name: %+v", plugin, got, ps)
		}
		if !strings.Contains(ps[0].Detail, "database "+other.Name+" with plugin "+plugin) || !strings.Contains(ps[0].Fix, "--slot") {
			t.Errorf("%s: %+v, want the other database, the plugin and --slot", plugin, ps[0])
		}
		nothingCreated(t, db, "public.outbox", "", cfg.Publication)
		if _, err := other.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			t.Fatal(err)
		}
	}
}

// relay run creates a slot that neither exists nor has a state row (a
// first start, no other slot relaying the outbox), and says so at Warn with
// what to do if the name is a typo: the new slot holds WAL from then on.
func TestRunWarnsWhenItCreatesASlot(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := relay.TeardownSlot(context.Background(), b.cfg); err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	b.cfg.Slot += "_typo"
	b.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b.start(t)
	out := logs.String()
	if !strings.Contains(out, "level=WARN msg=\"created replication slot "+b.cfg.Slot+": ") ||
		!strings.Contains(out, "relay teardown --slot "+b.cfg.Slot+" --slot-only --yes") {
		t.Fatalf("no warning naming the new slot and how to drop it:\n%s", out)
	}
}
