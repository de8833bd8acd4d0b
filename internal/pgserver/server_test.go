package pgserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stopAtEnd returns a function taking what a Start function returns: the
// server, stopped when the test ends, or, on an error, the test failed.
func stopAtEnd(t *testing.T) func(*Server, error) *Server {
	return func(s *Server, err error) *Server {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		return s
	}
}

// A started server has logical replication on; Stop shuts it down and
// leaves nothing behind.
func TestStartStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := stopAtEnd(t)(Start(ctx))
	dir := s.Dir
	conn, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	var level string
	err = conn.QueryRow(ctx, "SHOW wal_level").Scan(&level)
	_ = conn.Close(ctx)
	if err != nil || level != "logical" {
		t.Fatalf("wal_level = %q, %v; want logical", level, err)
	}
	s.Stop()
	s.Stop() // idempotent
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Stop: %v", dir, err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if conn, err := pgx.Connect(cctx, s.AdminURL); err == nil {
		_ = conn.Close(cctx)
		t.Error("server still accepts connections after Stop")
	}
}

func TestPgVersion(t *testing.T) {
	t.Parallel()
	for dir, want := range map[string]int{
		"/usr/lib/postgresql/15/bin":          15,
		"/opt/homebrew/opt/postgresql@16/bin": 16,
		"/usr/local/opt/postgresql@9.6/bin":   0,
		"/usr/lib/postgresql/whatever/bin":    0,
	} {
		if got := pgVersion(dir); got != want {
			t.Errorf("pgVersion(%s) = %d, want %d", dir, got, want)
		}
	}
}

// Missing binaries give ErrNotFound, whose message has the install command.
func TestFindBinDirMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := binGlobs
	binGlobs = []string{"/nonexistent/postgresql/*/bin"}
	defer func() { binGlobs = old }()
	if _, err := FindBinDir(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindBinDir = %v, want ErrNotFound", err)
	}
	if _, err := Start(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Start = %v, want ErrNotFound", err)
	}
}

// FindBinDirOf picks the version asked for, not the one PATH or "newest"
// would (a CI runner has another version preinstalled).
func TestFindBinDirOf(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"15", "16"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", filepath.Join(root, "16", "bin"))
	old := binGlobs
	binGlobs = []string{filepath.Join(root, "*", "bin")}
	defer func() { binGlobs = old }()
	if dir, err := FindBinDirOf(15); err != nil || dir != filepath.Join(root, "15", "bin") {
		t.Fatalf("FindBinDirOf(15) = %q, %v", dir, err)
	}
	if dir, err := FindBinDir(); err != nil || dir != filepath.Join(root, "16", "bin") {
		t.Fatalf("FindBinDir = %q, %v (PATH first)", dir, err)
	}
	if _, err := FindBinDirOf(17); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindBinDirOf(17) = %v, want ErrNotFound", err)
	}
}

// A standby made by StartStandby replays the primary's writes (and copies
// none of its slots); after the primary is killed, Promote makes it accept
// writes on a new timeline. Restart (immediate) brings a server back with
// its data. Both ways to make a standby: pg_basebackup, and the copy
// between pg_backup_start and pg_backup_stop that the Maven bundles get
// (no pg_basebackup there), here from Debian's server so every run checks
// it.
func TestStandbyPromoteRestart(t *testing.T) {
	t.Parallel()
	for name, standby := range map[string]func(*Server, context.Context) (*Server, error){
		"pg_basebackup": (*Server).StartStandby,
		"copy":          (*Server).startStandbyCopy,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testStandbyPromoteRestart(t, standby)
		})
	}
}

func testStandbyPromoteRestart(t *testing.T, standby func(*Server, context.Context) (*Server, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := stopAtEnd(t)(Start(ctx))
	exec := func(url, q string) { t.Helper(); execOn(ctx, t, url, q) }
	count := func(url string) int { t.Helper(); return countT(ctx, t, url) }
	exec(p.AdminURL, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`)
	exec(p.AdminURL, `SELECT pg_create_logical_replication_slot('not_copied', 'pgoutput')`)
	s := stopAtEnd(t)(standby(p, ctx))
	exec(p.AdminURL, `INSERT INTO t VALUES (2)`)
	deadline := time.Now().Add(time.Minute)
	for count(s.AdminURL) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the standby did not replay the second row")
		}
		time.Sleep(50 * time.Millisecond)
	}
	exec(s.AdminURL, `DO $$ BEGIN IF (SELECT count(*) FROM pg_replication_slots) > 0 THEN RAISE 'the standby has a copy of a slot'; END IF; END $$`)
	p.Kill()
	if err := s.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	exec(s.AdminURL, `INSERT INTO t VALUES (3)`)
	if err := s.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n := count(s.AdminURL); n != 3 {
		t.Fatalf("%d rows after an immediate restart, want 3", n)
	}
}

// execOn runs q on the server at url.
func execOn(ctx context.Context, t *testing.T, url, q string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// countT counts the rows of table t on the server at url.
func countT(ctx context.Context, t *testing.T, url string) (n int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// RestoreData puts back what CopyData copied, on the same port: the rows
// written after the copy are gone, the server's identity stays, and the
// copy can be restored again; StartCopy runs a second server from it,
// beside the first.
func TestCopyRestoreData(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := stopAtEnd(t)(Start(ctx))
	url := s.AdminURL
	execOn(ctx, t, url, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`)
	copied, err := s.CopyData(ctx)
	if err != nil {
		t.Fatal(err)
	}
	execOn(ctx, t, url, `INSERT INTO t VALUES (2)`)
	for range 2 {
		if err := s.RestoreData(ctx, copied); err != nil {
			t.Fatal(err)
		}
		if s.AdminURL != url {
			t.Fatalf("restored on %s, want %s", s.AdminURL, url)
		}
		if n := countT(ctx, t, url); n != 1 {
			t.Fatalf("%d rows after the restore, want the copy's 1", n)
		}
		execOn(ctx, t, url, `INSERT INTO t VALUES (3)`)
	}
	clone := stopAtEnd(t)(s.StartCopy(ctx, copied))
	if clone.AdminURL == url {
		t.Fatalf("the copy runs on the original's address %s", url)
	}
	execOn(ctx, t, clone.AdminURL, `INSERT INTO t VALUES (4)`)
	if n, m := countT(ctx, t, clone.AdminURL), countT(ctx, t, url); n != 2 || m != 2 {
		t.Fatalf("%d rows in the copy, %d in the original; want 2 and 2", n, m)
	}
}

// A server started from a template is a copy of the template's cluster:
// the template's system identifier, logical replication on, its writes its
// own (the template and a second copy do not see them).
func TestStartFromTemplate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	// As root the servers run as the postgres OS user, which must reach
	// the template: not under t.TempDir (0700).
	parent, err := os.MkdirTemp("", "pgoutbox-template-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(parent, "template")
	if err := InitTemplate(ctx, bin, tmpl); err != nil {
		t.Fatal(err)
	}
	a := stopAtEnd(t)(StartFromTemplate(ctx, bin, tmpl))
	execOn(ctx, t, a.AdminURL, `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`)
	b := stopAtEnd(t)(StartFromTemplate(ctx, bin, tmpl))
	c := stopAtEnd(t)(Start(ctx))
	sysid := func(s *Server) (id, level string, tables int) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.AdminURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `SELECT system_identifier::text, current_setting('wal_level'), (SELECT count(*) FROM pg_tables WHERE tablename = 't') FROM pg_control_system()`).Scan(&id, &level, &tables); err != nil {
			t.Fatal(err)
		}
		return id, level, tables
	}
	aid, alevel, _ := sysid(a)
	bid, blevel, btables := sysid(b)
	cid, _, _ := sysid(c)
	if aid != bid || alevel != "logical" || blevel != "logical" {
		t.Errorf("copies of one template: system identifiers %s and %s, wal_level %s and %s; want one identifier, logical", aid, bid, alevel, blevel)
	}
	if btables != 0 {
		t.Error("a second copy of the template sees a table the first created")
	}
	if cid == aid {
		t.Errorf("a server of its own (initdb) has the template's system identifier %s", cid)
	}
	if _, err := os.Stat(filepath.Join(TemplateData(tmpl), "postmaster.pid")); err == nil {
		t.Error("a server runs on the template itself")
	}
}
