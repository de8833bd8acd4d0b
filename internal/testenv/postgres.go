package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
)

// ExternalURLEnv names the environment variable that points tests at an
// existing server instead of a throwaway one.
const ExternalURLEnv = "PGOUTBOX_TEST_DATABASE_URL"

// Server is a running PostgreSQL server with logical replication enabled.
type Server = pgserver.Server

var (
	serverOnce sync.Once
	shared     *Server
	sharedErr  error
	dbCounter  atomic.Int64
)

// SharedServer returns the server of this test binary, starting it on first
// use. It fails t when no server can be had.
func SharedServer(t testing.TB) *Server {
	t.Helper()
	srv, err := sharedServer()
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	return srv
}

func sharedServer() (*Server, error) {
	serverOnce.Do(func() {
		if url := os.Getenv(ExternalURLEnv); url != "" {
			shared = &Server{AdminURL: url}
			return
		}
		shared, sharedErr = startShared()
	})
	return shared, sharedErr
}

func stopServer() {
	if shared != nil {
		shared.Stop()
	}
}

// FindBinDir returns the directory holding initdb and postgres (see
// pgserver.FindBinDir).
func FindBinDir() (string, error) {
	dir, err := pgserver.FindBinDir()
	if err != nil {
		return "", fmt.Errorf("%w; or set %s", err, ExternalURLEnv)
	}
	return dir, nil
}

// StartServer starts a standalone throwaway server (see pgserver.Start) of
// the version PostgresVersionEnv names, with extra "name=value" settings
// over the defaults (wal_level=replica, for example). Stop removes it all.
// It runs initdb: the server has a system identifier of its own.
func StartServer(settings ...string) (*Server, error) {
	ctx := context.Background()
	bin, err := serverBinDir(ctx)
	if err != nil {
		return nil, err
	}
	return pgserver.StartIn(ctx, bin, settings...)
}

// startShared starts the test binary's shared server from a copy of the
// data-directory template of its server binaries (dataTemplate), not an
// initdb of its own: every test binary starts one.
func startShared() (*Server, error) {
	ctx := context.Background()
	bin, err := serverBinDir(ctx)
	if err != nil {
		return nil, err
	}
	tmpl, err := dataTemplate(ctx, bin)
	if err != nil {
		return nil, err
	}
	return pgserver.StartFromTemplate(ctx, bin, tmpl)
}

// serverBinDir is the directory of the server binaries of the version
// PostgresVersionEnv names (postgresBinDir), else FindBinDir's.
func serverBinDir(ctx context.Context) (string, error) {
	bin, err := postgresBinDir(ctx)
	if err != nil || bin != "" {
		return bin, err
	}
	return FindBinDir()
}

// NewServer starts a standalone throwaway server for t, as StartServer
// does, and stops it when the test ends. It fails t when no server can be
// had.
func NewServer(t testing.TB, settings ...string) *Server {
	t.Helper()
	srv, err := StartServer(settings...)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// DB is a fresh database on the shared server, dropped when the test ends.
type DB struct {
	// Name is the database name.
	Name string
	// URL connects to the database as a superuser.
	URL string
	// Pool is a connection pool on URL, closed when the test ends.
	Pool *pgxpool.Pool
	// SQL is Pool as a database/sql handle (pgx's stdlib driver), for the
	// database/sql paths; closed when the test ends.
	SQL *sql.DB
	// Server is the server holding the database.
	Server *Server
}

// NewDB creates a database for t on the shared server. At cleanup it drops
// the database's replication slots and the database itself.
func NewDB(t testing.TB) *DB {
	t.Helper()
	db, err := OpenDB()
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// OpenDB creates a database on the shared server for code that has no
// testing.TB, such as examples. Close drops it.
func OpenDB() (*DB, error) {
	srv, err := sharedServer()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("pgoutbox_test_%d_%d", os.Getpid(), dbCounter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	db := &DB{Name: name, Server: srv}
	if db.URL, err = replaceDatabase(srv.AdminURL, name); err == nil {
		db.Pool, err = pgxpool.New(ctx, db.URL)
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	db.SQL = stdlib.OpenDBFromPool(db.Pool)
	return db, nil
}

// Close closes SQL and the pool and drops the database with its replication
// slots.
func (db *DB) Close() error {
	if db.SQL != nil {
		_ = db.SQL.Close()
	}
	if db.Pool != nil {
		db.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, db.Server.AdminURL)
	if err != nil {
		return fmt.Errorf("postgres: drop %s: %w", db.Name, err)
	}
	defer admin.Close(ctx)
	// Slots keep a database alive: end their walsenders, then drop them.
	for {
		_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, db.Name)
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db.Name)
		var left int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db.Name).Scan(&left); err != nil || left == 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("postgres: drop slots of %s: %w", db.Name, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("postgres: drop database %s: %w", db.Name, err)
	}
	return nil
}

// Querier is what QueryStrings reads with: a pool, a connection or a
// transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// QueryStrings runs sql on q and returns its rows' one text column; an
// error fails the test.
func QueryStrings(ctx context.Context, t testing.TB, q Querier, sql string, args ...any) []string {
	t.Helper()
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// replaceDatabase returns the connection string u with its database set to
// name; u is a URL or a keyword/value string.
func replaceDatabase(u, name string) (string, error) {
	if !strings.Contains(u, "://") {
		return u + " dbname=" + name, nil
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("parse database URL: %w", redact(err))
	}
	parsed.Path = "/" + name
	return parsed.String(), nil
}

// redact drops the URL (and so any password) from a url.Parse error.
func redact(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// WithSenderTimeout returns the database URL u with wal_sender_timeout set
// to d for its connections (a relay's liveness bound is half of it).
func WithSenderTimeout(t testing.TB, u string, d time.Duration) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set("options", fmt.Sprintf("-c wal_sender_timeout=%dms", d.Milliseconds()))
	parsed.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads + literally
	return parsed.String()
}
