//go:build unix

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
	return start(ctx, false, settings)
}

// StartPrivate is Start for a server only its own OS user (and root) can
// reach: it listens on no TCP port, only on a Unix socket in its
// directory, which is mode 0700. Its superuser trusts whoever connects, so
// a TCP listener would hand any local user a superuser (and through COPY
// ... TO PROGRAM, the server's OS account). AdminURL names the socket.
func StartPrivate(ctx context.Context, settings ...string) (*Server, error) {
	return start(ctx, true, settings)
}

// StartIn is Start with the server binaries in bin (initdb, postgres and
// pg_ctl; another version's, say), not the ones FindBinDir finds.
func StartIn(ctx context.Context, bin string, settings ...string) (*Server, error) {
	return startIn(ctx, bin, false, settings)
}

func start(ctx context.Context, private bool, settings []string) (*Server, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	return startIn(ctx, bin, private, settings)
}

// startIn is start with the server binaries in bin.
func startIn(ctx context.Context, bin string, private bool, settings []string) (*Server, error) {
	return create(ctx, "pgoutbox-pg-", bin, private, settings, func(data string, cred *syscall.Credential) error {
		return initdb(ctx, bin, data, cred)
	})
}

// initdb writes a new cluster into data as cred (nil: as we are).
func initdb(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	return run(ctx, cred, exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"))
}

// InitTemplate writes what Start's initdb writes, with the server binaries
// in bin, into dir/data (TemplateData), for StartFromTemplate: dir must
// not exist; it is created and, as root, handed to the server's OS user.
// Nothing may start a server on the template itself.
func InitTemplate(ctx context.Context, bin, dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	cred, err := serverCredential(dir)
	if err == nil {
		err = initdb(ctx, bin, TemplateData(dir), cred)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return err
}

// TemplateData is the data directory InitTemplate writes into dir.
func TemplateData(dir string) string { return filepath.Join(dir, "data") }

// StartFromTemplate is StartIn with a copy (cp -a) of the data directory
// InitTemplate wrote into template, in place of an initdb of its own:
// the same cluster, for a fraction of the work. Every server started from
// one template has the template's system identifier.
func StartFromTemplate(ctx context.Context, bin, template string, settings ...string) (*Server, error) {
	return create(ctx, "pgoutbox-pg-", bin, false, settings, func(data string, cred *syscall.Credential) error {
		return run(ctx, cred, exec.CommandContext(ctx, "cp", "-a", TemplateData(template), data))
	})
}

// run runs cmd as cred (nil: as we are) in its own process group, so that
// a terminal's Ctrl-C reaches us and we decide; its output is in the error.
func run(ctx context.Context, cred *syscall.Credential, cmd *exec.Cmd) error {
	cmd.SysProcAttr = procAttr(cred)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %v: %s", filepath.Base(cmd.Path), err, out)
	}
	return nil
}

// create makes a server in a new temporary directory named after prefix:
// fill writes its data directory (initdb, pg_basebackup or a copy) with
// the server's OS user as owner, then the server starts on a free loopback
// port. On error nothing is left behind.
func create(ctx context.Context, prefix, bin string, private bool, settings []string, fill func(data string, cred *syscall.Credential) error) (*Server, error) {
	dir, err := os.MkdirTemp("", prefix)
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
	if err := fill(data, cred); err != nil {
		s.Stop()
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			s.Stop()
			return nil, err
		}
		err = s.start(ctx, &proc{bin: bin, data: data, port: port, cred: cred, private: private, settings: settings})
		if err == nil {
			return s, nil
		}
		if attempt == 2 || ctx.Err() != nil {
			s.Stop()
			return nil, err
		}
	}
}

// proc is what starting the server process takes.
type proc struct {
	bin, data string
	port      int
	cred      *syscall.Credential
	// private: no TCP listener (StartPrivate).
	private  bool
	settings []string
}

func (s *Server) start(ctx context.Context, p *proc) error {
	s.proc = p
	bin, data, port, cred, settings := p.bin, p.data, p.port, p.cred, p.settings
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	listen := "127.0.0.1"
	if p.private {
		listen = ""
	}
	args := []string{"-D", data,
		"-c", "listen_addresses=" + listen,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + s.Dir,
		"-c", "wal_level=logical",
		"-c", "max_replication_slots=250",
		"-c", "max_wal_senders=250",
		"-c", "max_connections=1000",
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
	if p.private {
		s.AdminURL = fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", url.QueryEscape(s.Dir), port)
	}

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

// kill ends the server's process group at once and waits for it. A
// server already reaped is not signalled: its process group's ID may be
// another process's by now (IDs wrap at pid_max, 32768 here), and a
// signal to it killed another test's broker or server.
func (s *Server) kill() {
	select {
	case <-s.exited:
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
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

// Kill ends the server at once with SIGKILL, like a machine crash, and
// keeps its data directory (Restart starts it again, Stop removes it).
func (s *Server) Kill() {
	if s.cmd != nil {
		s.kill()
	}
}

// Restart stops the server (immediate: SIGQUIT, a crash-like stop that
// recovers from the WAL at the next start; otherwise a fast shutdown) and
// starts it again on the same port and data directory.
func (s *Server) Restart(ctx context.Context, immediate bool) error {
	if s.proc == nil {
		return fmt.Errorf("pgserver: restart needs a server started here")
	}
	s.halt(immediate)
	return s.start(ctx, s.proc)
}

// halt stops the server process (immediate: SIGQUIT; otherwise a fast
// shutdown), keeping its data directory.
func (s *Server) halt(immediate bool) {
	if s.cmd == nil {
		return
	}
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
		s.cmd = nil
	case <-time.After(30 * time.Second):
		s.kill()
	}
}

// CopyData stops the server (a fast shutdown), copies its data directory
// into the server's directory (Stop removes the copy with it) and starts
// it again. It returns the copy, for RestoreData: what a disk snapshot of
// the server's volume keeps.
func (s *Server) CopyData(ctx context.Context) (string, error) {
	if s.proc == nil {
		return "", fmt.Errorf("pgserver: copying the data needs a server started here")
	}
	s.halt(false)
	s.copies++
	dst := filepath.Join(s.Dir, fmt.Sprintf("data-copy-%d", s.copies))
	if err := s.copyDir(ctx, s.proc.data, dst); err != nil {
		return "", errors.Join(err, s.start(ctx, s.proc))
	}
	return dst, s.start(ctx, s.proc)
}

// RestoreData stops the server (a fast shutdown), replaces its data
// directory with a copy made by CopyData (the copy stays, for another
// restore) and starts it again on the same port: a disk snapshot restored
// over the server, with the same system identifier, timeline and slots.
func (s *Server) RestoreData(ctx context.Context, copied string) error {
	if s.proc == nil {
		return fmt.Errorf("pgserver: restoring the data needs a server started here")
	}
	s.halt(false)
	if err := os.RemoveAll(s.proc.data); err != nil {
		return err
	}
	if err := s.copyDir(ctx, copied, s.proc.data); err != nil {
		return err
	}
	return s.start(ctx, s.proc)
}

// StartCopy starts a second server from a data directory CopyData made,
// in a new temporary directory on a free port: a file-level clone of s
// (same system identifier, timeline, slots and data) running beside it.
// Stop removes it.
func (s *Server) StartCopy(ctx context.Context, copied string) (*Server, error) {
	if s.proc == nil {
		return nil, fmt.Errorf("pgserver: a copy needs a server started here")
	}
	return create(ctx, "pgoutbox-pg-copy-", s.proc.bin, s.proc.private, s.proc.settings, func(data string, cred *syscall.Credential) error {
		return run(ctx, cred, exec.CommandContext(ctx, "cp", "-a", copied, data))
	})
}

// copyDir copies the directory src to dst as the server's OS user, keeping
// modes (the server refuses a data directory others can read).
func (s *Server) copyDir(ctx context.Context, src, dst string) error {
	cmd := exec.CommandContext(ctx, "cp", "-a", src, dst)
	cmd.SysProcAttr = procAttr(s.proc.cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgserver: copy %s to %s: %v: %s", src, dst, err, out)
	}
	return nil
}

// StartStandby makes a physical streaming standby of s: pg_basebackup -R
// into a new temporary directory, started on a free port; where no
// pg_basebackup of the server's major version is found (the Maven
// bundles), a copy of the data directory between pg_backup_start and
// pg_backup_stop (standbycopy.go). Stop removes it.
func (s *Server) StartStandby(ctx context.Context) (*Server, error) {
	if s.proc == nil {
		return nil, fmt.Errorf("pgserver: a standby needs a primary started here")
	}
	if !s.hasBaseBackup() {
		return s.startStandbyCopy(ctx)
	}
	host := "127.0.0.1"
	if s.proc.private {
		host = s.Dir
	}
	return create(ctx, "pgoutbox-pg-standby-", s.proc.bin, s.proc.private, s.proc.settings, func(data string, cred *syscall.Credential) error {
		return run(ctx, cred, exec.CommandContext(ctx, tool(s.proc.bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream",
			"-c", "fast", "-h", host, "-p", strconv.Itoa(s.proc.port), "-U", "postgres"))
	})
}

// Promote promotes a standby to a primary (pg_ctl promote, waiting until
// it accepts writes).
func (s *Server) Promote(ctx context.Context) error {
	if s.proc == nil {
		return fmt.Errorf("pgserver: promote needs a server started here")
	}
	cmd := exec.CommandContext(ctx, tool(s.proc.bin, "pg_ctl"), "promote", "-w", "-t", "60", "-D", s.proc.data)
	cmd.SysProcAttr = procAttr(s.proc.cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl promote: %v: %s", err, out)
	}
	return nil
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.port
}

// tool returns the path of a PostgreSQL program: next to postgres in bin,
// else under binGlobs, else on PATH (bin may be a directory of wrappers
// holding only initdb and postgres).
func tool(bin, name string) string {
	if _, err := os.Stat(filepath.Join(bin, name)); err == nil {
		return filepath.Join(bin, name)
	}
	for _, g := range binGlobs {
		m, _ := filepath.Glob(filepath.Join(g, name))
		if len(m) > 0 {
			return m[len(m)-1]
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join(bin, name)
}
