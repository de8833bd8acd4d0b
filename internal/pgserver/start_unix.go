//go:build unix

package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Start initialises a cluster in a new temporary directory and starts it on
// a free loopback port with wal_level=logical. Cancelling ctx aborts the
// start. Stop removes it all; on error nothing is left behind. settings are
// extra "name=value" server settings, applied after (over) the defaults.
func Start(ctx context.Context, settings ...string) (*Server, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgoutbox-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, log: filepath.Join(dir, "postgres.log")}
	cred, err := serverCredential(dir)
	if err != nil {
		s.Stop()
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	// Own process group: a terminal's Ctrl-C reaches us, and we decide.
	initdb.SysProcAttr = procAttr(cred)
	initdb.Cancel = func() error { return syscall.Kill(-initdb.Process.Pid, syscall.SIGKILL) }
	if out, err := initdb.CombinedOutput(); err != nil {
		s.Stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			s.Stop()
			return nil, err
		}
		err = s.start(ctx, bin, data, port, cred, settings)
		if err == nil {
			return s, nil
		}
		if attempt == 2 || ctx.Err() != nil {
			s.Stop()
			return nil, err
		}
	}
}

func (s *Server) start(ctx context.Context, bin, data string, port int, cred *syscall.Credential, settings []string) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + s.Dir,
		"-c", "wal_level=logical",
		"-c", "max_replication_slots=100",
		"-c", "max_wal_senders=100",
		"-c", "max_connections=400",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_wal_size=4GB",
	}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with this process, even on a crash; its own process
	// group keeps a terminal's Ctrl-C away from it (Stop shuts it down).
	cmd.SysProcAttr = procAttr(cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.AdminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start: %s", tail(s.log))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, s.AdminURL)
		if err == nil {
			_ = conn.Close(cctx)
			cancel()
			return nil
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("postgres did not accept connections within 60s: %s", tail(s.log))
}

// Stop shuts the server down (fast shutdown, then kill) and removes its
// directory. It is idempotent and a no-op for a Server not started here.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
			s.cmd = nil
		case <-time.After(10 * time.Second):
			s.kill()
		}
	}
	if s.Dir != "" {
		_ = os.RemoveAll(s.Dir)
		s.Dir = ""
	}
}

// kill ends the server's process group at once and waits for it.
func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
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
