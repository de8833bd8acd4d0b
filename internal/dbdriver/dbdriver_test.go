package dbdriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainWithDatabase(m) }

// handle is one driver's handles on a test database, as the tests use
// them.
type handle struct {
	name string
	// db is the driver's DB on the database's pool (or *sql.DB).
	db func(*testenv.DB) dbdriver.DB
	// bare is the driver's DB on a handle that only begins transactions.
	bare func(*testenv.DB) dbdriver.DB
	// begin opens a transaction of the driver's own type and returns it
	// adopted, with the driver's transaction Unwrap must give back.
	begin func(t *testing.T, db *testenv.DB) (tx dbdriver.Tx, own any)
	// unwrap is the family's Unwrap, typed any.
	unwrap func(ctx context.Context, tx dbdriver.Tx) (any, error)
}

type pgxBeginner struct{ dbdriver.Beginner }
type sqlBeginner struct{ dbdriver.SQLBeginner }

// handles are both drivers: every test runs once on each.
var handles = []handle{{
	name: "pgx",
	db:   func(db *testenv.DB) dbdriver.DB { return dbdriver.PgxDB(db.Pool) },
	bare: func(db *testenv.DB) dbdriver.DB { return dbdriver.PgxDB(pgxBeginner{db.Pool}) },
	begin: func(t *testing.T, db *testenv.DB) (dbdriver.Tx, any) {
		tx, err := db.Pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return dbdriver.PgxFamily.Adopt(tx), tx
	},
	unwrap: func(ctx context.Context, tx dbdriver.Tx) (any, error) { return dbdriver.PgxFamily.Unwrap(ctx, tx) },
}, {
	name: "database/sql",
	db:   func(db *testenv.DB) dbdriver.DB { return dbdriver.SQLDB(db.SQL) },
	bare: func(db *testenv.DB) dbdriver.DB { return dbdriver.SQLDB(sqlBeginner{db.SQL}) },
	begin: func(t *testing.T, db *testenv.DB) (dbdriver.Tx, any) {
		tx, err := db.SQL.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return dbdriver.SQLFamily.Adopt(tx), tx
	},
	unwrap: func(ctx context.Context, tx dbdriver.Tx) (any, error) { return dbdriver.SQLFamily.Unwrap(ctx, tx) },
}}

// forHandles runs test once per driver, in parallel, each on a fresh
// database with a table t (id int primary key, v text).
func forHandles(t *testing.T, test func(t *testing.T, h handle, db *testenv.DB)) {
	t.Parallel()
	for _, h := range handles {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			db := testenv.NewDB(t)
			if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE t (id int PRIMARY KEY, v text)`); err != nil {
				t.Fatal(err)
			}
			test(t, h, db)
		})
	}
}

// values returns the v of every row of t, by id.
func values(t *testing.T, db *testenv.DB) []string {
	t.Helper()
	return testenv.QueryStrings(context.Background(), t, db.Pool, `SELECT coalesce(v, 'NULL') FROM t ORDER BY id`)
}

// A transaction of DB runs Exec, Query and QueryRow, and commits or rolls
// back; the first statement may be a one-row query (pgx sends it with
// BEGIN) and the rest of the transaction sees the same snapshot and XID.
func TestTransactions(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		d := h.db(db)
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var first, again int64
		if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if n, err := tx.Exec(ctx, `INSERT INTO t VALUES (1, 'a'), (2, NULL)`); err != nil || n != 2 {
			t.Fatalf("Exec: %d rows, %v", n, err)
		}
		if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&again); err != nil || again != first {
			t.Fatalf("second statement in transaction %d, first in %d (%v)", again, first, err)
		}
		rows, err := tx.Query(ctx, `SELECT id FROM t ORDER BY id`)
		ids, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (id int, err error) {
			err = r.Scan(&id)
			return id, err
		})
		if err != nil || fmt.Sprint(ids) != "[1 2]" {
			t.Fatalf("Query: %v, %v", ids, err)
		}
		if vs := values(t, db); len(vs) != 0 {
			t.Fatalf("uncommitted rows visible: %v", vs)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if vs := values(t, db); fmt.Sprint(vs) != "[a NULL]" {
			t.Fatalf("committed %v", vs)
		}

		tx, err = d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM t`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if vs := values(t, db); len(vs) != 2 {
			t.Fatalf("rolled back, yet %v", vs)
		}
		// A transaction that never ran a statement ends without error.
		tx, err = d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// No row is pgx.ErrNoRows on both drivers, first statement or not.
func TestNoRows(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		err := dbdriver.BeginFunc(ctx, h.db(db), func(tx dbdriver.Tx) error {
			for range 2 {
				var v string
				if err := tx.QueryRow(ctx, `SELECT v FROM t WHERE id = 42`).Scan(&v); !errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("no row: %v, want pgx.ErrNoRows", err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.db(db).Autocommit().QueryRow(ctx, `SELECT v FROM t`).Scan(new(string)); !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("autocommit no row: %v", err)
		}
	})
}

// A savepoint's rollback undoes its statements only; its commit keeps
// them; ending it twice fails.
func TestSavepoints(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		err := dbdriver.BeginFunc(ctx, h.db(db), func(tx dbdriver.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1, 'outer')`); err != nil {
				return err
			}
			for i, keep := range []bool{false, true} {
				sp, err := tx.Savepoint(ctx)
				if err != nil {
					return err
				}
				if _, err := sp.Exec(ctx, `INSERT INTO t VALUES ($1, 'inner')`, 10+i); err != nil {
					return err
				}
				if keep {
					err = sp.Commit(ctx)
				} else {
					err = sp.Rollback(ctx)
				}
				if err != nil {
					return err
				}
				if sp.Rollback(ctx) == nil && h.name == "database/sql" {
					return errors.New("a savepoint ended twice")
				}
			}
			// The transaction goes on after a failed statement in a
			// savepoint that was rolled back.
			sp, err := tx.Savepoint(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, `INSERT INTO t VALUES (1, 'duplicate')`); err == nil {
				return errors.New("duplicate key accepted")
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE t SET v = v || '!' WHERE id = 1`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if vs := values(t, db); fmt.Sprint(vs) != "[outer! inner]" {
			t.Fatalf("rows %v, want [outer! inner]", vs)
		}
	})
}

// CopyFrom writes every row, NULLs included, in the caller's transaction:
// 40000 rows of two columns take two INSERTs on database/sql (Postgres
// allows 65535 parameters per statement).
func TestCopyFrom(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		rows := make([][]any, 40000)
		for i := range rows {
			rows[i] = []any{i + 1, fmt.Sprint("v", i+1)}
		}
		rows[1][1] = nil
		tx, _ := h.begin(t, db)
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"public", "t"}, []string{"id", "v"}, rows)
		if err != nil || n != int64(len(rows)) {
			t.Fatalf("CopyFrom: %d, %v", n, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		vs := values(t, db)
		if len(vs) != len(rows) || vs[0] != "v1" || vs[1] != "NULL" || vs[39999] != "v40000" {
			t.Fatalf("%d rows, first %v", len(vs), vs[:2])
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"public", "t"}, []string{"id", "v"}, rows[:1]); err == nil {
			t.Fatal("CopyFrom after commit succeeded")
		}
	})
}

// Autocommit statements commit on their own; a handle that only begins
// transactions has none, and RunStatement and ExecOne then use a
// transaction of their own.
func TestAutocommit(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		q := h.db(db).Autocommit()
		if q == nil {
			t.Fatal("no Autocommit on a pool")
		}
		if n, err := q.Exec(ctx, `INSERT INTO t VALUES (1, 'auto')`); err != nil || n != 1 {
			t.Fatalf("Exec: %d, %v", n, err)
		}
		bare := h.bare(db)
		if bare.Autocommit() != nil {
			t.Fatal("Autocommit on a bare Beginner")
		}
		for _, d := range []dbdriver.DB{h.db(db), bare} {
			if n, err := dbdriver.ExecOne(ctx, d, `UPDATE t SET v = v || '+'`); err != nil || n != 1 {
				t.Fatalf("ExecOne: %d, %v", n, err)
			}
		}
		if vs := values(t, db); fmt.Sprint(vs) != "[auto++]" {
			t.Fatalf("rows %v", vs)
		}
		// BeginFunc rolls back when fn fails.
		boom := errors.New("boom")
		err := dbdriver.BeginFunc(ctx, bare, func(tx dbdriver.Tx) error {
			if _, err := tx.Exec(ctx, `DELETE FROM t`); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || len(values(t, db)) != 1 {
			t.Fatalf("BeginFunc: %v, rows %v", err, values(t, db))
		}
	})
}

// The family adopts the caller's transaction (nil stays nil), and Unwrap
// gives back the driver's own transaction: the caller's, or the one a DB
// began (which pgx begins late, at the first statement or at Unwrap).
func TestFamily(t *testing.T) {
	forHandles(t, func(t *testing.T, h handle, db *testenv.DB) {
		ctx := context.Background()
		tx, own := h.begin(t, db)
		if got, err := h.unwrap(ctx, tx); err != nil || got != own {
			t.Fatalf("Unwrap of the caller's transaction: %v, %v", got, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (1, 'caller')`); err != nil {
			t.Fatal(err)
		}
		began, err := h.db(db).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer began.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
		inner, err := h.unwrap(ctx, began)
		if err != nil {
			t.Fatal(err)
		}
		switch tx := inner.(type) {
		case pgx.Tx:
			_, err = tx.Exec(ctx, `INSERT INTO t VALUES (2, 'began')`)
		case *sql.Tx:
			_, err = tx.ExecContext(ctx, `INSERT INTO t VALUES (2, 'began')`)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := began.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if vs := values(t, db); fmt.Sprint(vs) != "[began]" {
			t.Fatalf("rows %v: the began transaction's row only", vs)
		}
	})
	if dbdriver.PgxFamily.Adopt(nil) != nil || dbdriver.SQLFamily.Adopt(nil) != nil {
		t.Error("Adopt(nil) is not nil")
	}
}
