package pgserver

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A started server has logical replication on; Stop shuts it down and
// leaves nothing behind.
func TestStartStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
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
