package relay_test

import (
	"context"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// needPostgres returns the major version of b's server, and skips t below
// major, naming what needs it and how to run the test on it.
func (b *bundle) needPostgres(t *testing.T, major int, what string) int {
	t.Helper()
	var version int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int / 10000`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < major {
		t.Skipf("%s is PostgreSQL %d's; the server is %d (run it with %s=%d: make test-pg PG=%d)", what, major, version, testenv.PostgresVersionEnv, major, major)
	}
	return version
}

// exec runs each statement on b's database, failing t on an error.
func (b *bundle) exec(t *testing.T, statements ...string) {
	t.Helper()
	for _, q := range statements {
		if _, err := b.db.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
