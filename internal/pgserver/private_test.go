//go:build unix

package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A private server (relay dev's) takes connections on its socket from its
// own OS user, on no TCP port, and from no other OS user: its superuser
// trusts whoever connects. Before, it listened on 127.0.0.1 and any local
// user could run COPY ... TO PROGRAM as its OS user.
func TestStartPrivate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := stopAtEnd(t)(StartPrivate(ctx))
	conn, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		t.Fatalf("its own user cannot connect: %v", err)
	}
	_ = conn.Close(ctx)
	tcp := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", s.Port())
	if conn, err := pgx.Connect(ctx, tcp); err == nil {
		_ = conn.Close(ctx)
		t.Fatal("the private server takes TCP connections")
	}
	if fi, err := os.Stat(s.Dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("its directory %s: %v %v, want no access for others", s.Dir, fi.Mode(), err)
	}
	if os.Geteuid() != 0 {
		t.Skip("checking another OS user needs root (to run psql as nobody)")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	psql := exec.CommandContext(ctx, tool(s.proc.bin, "psql"), "-h", s.Dir, "-p", strconv.Itoa(s.Port()), "-U", "postgres", "-c", "SELECT 1")
	psql.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	psql.Dir = "/"
	out, err := psql.CombinedOutput()
	if err == nil {
		t.Fatalf("another OS user connected:\n%s", out)
	}
	t.Logf("another OS user is refused: %s", out)
}
