package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ExternalURLEnv names the environment variable that points tests at an
// existing server instead of a throwaway one.
const ExternalURLEnv = "PGOUTBOX_TEST_DATABASE_URL"

// Server is a running PostgreSQL server with logical replication enabled.
type Server struct {
	// AdminURL connects as a superuser to the postgres database.
	AdminURL string

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	dir    string
	log    string
}

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
		shared, sharedErr = StartServer()
	})
	return shared, sharedErr
}

func stopServer() {
	if shared != nil {
		shared.Stop()
	}
}

// FindBinDir returns the directory holding initdb and postgres: PATH first,
// then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries not found (initdb on PATH or /usr/lib/postgresql/*/bin); install them with: apt-get install -y postgresql-15, or set " + ExternalURLEnv)
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartServer initialises a cluster in a new temporary directory and starts
// it on a free loopback port with wal_level=logical. Stop removes it all.
func StartServer() (*Server, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgoutbox-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, log: filepath.Join(dir, "postgres.log")}
	cred, err := serverCredential(dir)
	if err != nil {
		s.Stop()
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			s.Stop()
			return nil, err
		}
		err = s.start(bin, data, port, cred)
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			s.Stop()
			return nil, err
		}
	}
}

func (s *Server) start(bin, data string, port int, cred *syscall.Credential) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "wal_level=logical",
		"-c", "max_replication_slots=100",
		"-c", "max_wal_senders=100",
		"-c", "max_connections=400",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_wal_size=4GB",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test binary, even on a crash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.AdminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start: %s", tail(s.log))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.AdminURL)
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	s.cmd = nil
	return fmt.Errorf("postgres did not accept connections within 60s: %s", tail(s.log))
}

// Stop shuts the server down (fast shutdown, then kill) and removes its
// directory. It is a no-op for an external server.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		s.cmd = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// serverCredential returns nil when not root; as root it returns the
// postgres OS user and hands dir to it.
func serverCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root: need the postgres OS user (apt-get install -y postgresql-15 creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// DB is a fresh database on the shared server, dropped when the test ends.
type DB struct {
	// Name is the database name.
	Name string
	// URL connects to the database as a superuser.
	URL string
	// Pool is a connection pool on URL, closed when the test ends.
	Pool *pgxpool.Pool
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
	return db, nil
}

// Close closes the pool and drops the database with its replication slots.
func (db *DB) Close() error {
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
