package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The servers the tests start are of the major version PGOUTBOX_TEST_PG
// asks for (15 when unset), the shared one and a standalone one, and a
// standalone one makes a standby (on 16 to 18 a copy of its data
// directory: the bundles have no pg_basebackup) that replays its writes
// and is promoted.
func TestPostgresVersionAsked(t *testing.T) {
	t.Parallel()
	if os.Getenv(testenv.ExternalURLEnv) != "" {
		t.Skipf("%s names an external server", testenv.ExternalURLEnv)
	}
	want, err := testenv.PostgresVersion()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	connect := func(url string) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	const version = `SELECT current_setting('server_version_num')::int / 10000`
	var shared, standalone int
	if err := testenv.NewDB(t).Pool.QueryRow(ctx, version).Scan(&shared); err != nil || shared != want {
		t.Errorf("the shared server is PostgreSQL %d (%v), want %d", shared, err, want)
	}
	primary := testenv.NewServer(t)
	pc := connect(primary.AdminURL)
	if err := pc.QueryRow(ctx, version).Scan(&standalone); err != nil || standalone != want {
		t.Errorf("NewServer started PostgreSQL %d (%v), want %d", standalone, err, want)
	}
	if _, err := pc.Exec(ctx, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	if _, err := pc.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	sc := connect(standby.AdminURL)
	testenv.WaitFor(t, time.Minute, "the standby to replay both rows", func() (bool, error) {
		var n int
		err := sc.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n)
		return n == 2, err
	})
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Exec(ctx, `INSERT INTO t VALUES (3)`); err != nil {
		t.Fatalf("the promoted standby takes no writes: %v", err)
	}
}
