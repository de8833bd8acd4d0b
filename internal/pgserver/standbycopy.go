//go:build unix

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// The Maven bundles of Postgres 16 to 18 hold no pg_basebackup, and
// Debian's pg_basebackup 15 refuses a newer server ("incompatible server
// version"). A standby of such a server is the documented low-level base
// backup instead: pg_backup_start, a copy of the data directory, then
// pg_backup_stop's backup_label in the copy, the WAL written meanwhile,
// standby.signal and primary_conninfo.

// copies numbers the temporary slots of this process's copies.
var copies atomic.Int64

// hasBaseBackup reports whether a pg_basebackup of the server's major
// version is at hand.
func (s *Server) hasBaseBackup() bool {
	server := majorVersion(filepath.Join(s.proc.bin, "postgres"))
	return server > 0 && majorVersion(tool(s.proc.bin, "pg_basebackup")) == server
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// majorVersion runs program --version and returns the major version it
// prints, or 0.
func majorVersion(program string) int {
	out, err := exec.Command(program, "--version").Output()
	if err != nil {
		return 0
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// startStandbyCopy is StartStandby by a copy of the data directory.
func (s *Server) startStandbyCopy(ctx context.Context) (*Server, error) {
	conn, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("pgserver: standby: %w", err)
	}
	// Ending the session drops the slot and aborts a backup not stopped.
	defer conn.Close(context.WithoutCancel(ctx))
	// A temporary slot keeps the WAL from the backup's start until the
	// standby streams.
	slot := fmt.Sprintf("pgoutbox_standby_copy_%d_%d", os.Getpid(), copies.Add(1))
	if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, slot); err != nil {
		return nil, fmt.Errorf("pgserver: standby: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_backup_start('pgoutbox standby', true)`); err != nil {
		return nil, fmt.Errorf("pgserver: standby: %w", err)
	}
	host := "127.0.0.1"
	if s.proc.private {
		host = s.Dir
	}
	src := s.proc.data
	return create(ctx, "pgoutbox-pg-standby-", s.proc.bin, s.proc.private, s.proc.settings, func(data string, cred *syscall.Credential) error {
		if err := copyTree(src, data, cred, skipInBackup); err != nil {
			return fmt.Errorf("pgserver: standby: copy %s: %w", src, err)
		}
		var label string
		if err := conn.QueryRow(ctx, `SELECT labelfile FROM pg_backup_stop(false)`).Scan(&label); err != nil {
			return fmt.Errorf("pgserver: standby: %w", err)
		}
		// The WAL from the backup's start to its stop, after the stop.
		if err := copyTree(filepath.Join(src, "pg_wal"), filepath.Join(data, "pg_wal"), cred, nil); err != nil {
			return fmt.Errorf("pgserver: standby: copy WAL: %w", err)
		}
		conninfo := fmt.Sprintf("\nprimary_conninfo = 'host=%s port=%d user=postgres'\n", host, s.proc.port)
		for name, text := range map[string]string{"backup_label": label, "standby.signal": ""} {
			if err := writeOwned(filepath.Join(data, name), []byte(text), cred); err != nil {
				return err
			}
		}
		auto := filepath.Join(data, "postgresql.auto.conf")
		conf, err := os.ReadFile(auto)
		if err != nil {
			return err
		}
		return writeOwned(auto, append(conf, conninfo...), cred)
	})
}

// skipInBackup reports whether a base backup leaves out the file or
// directory at rel (relative to the data directory), after pg_basebackup's
// lists (basebackup.c): the server's runtime state, whose directories stay
// but empty, and pg_wal's contents, copied after pg_backup_stop.
func skipInBackup(rel string) bool {
	switch filepath.Dir(rel) {
	case "pg_wal", "pg_replslot", "pg_dynshmem", "pg_notify", "pg_serial", "pg_snapshots", "pg_stat_tmp", "pg_subtrans":
		return true
	}
	switch base := filepath.Base(rel); {
	case rel == "postmaster.pid", rel == "postmaster.opts", rel == "backup_label", rel == "tablespace_map",
		rel == "standby.signal", rel == "recovery.signal", base == "pg_internal.init":
		return true
	default:
		return strings.HasPrefix(base, "pgsql_tmp")
	}
}

// copyTree copies the tree at src to dst, owned by cred when set, leaving
// out what skip says. Files that vanish while it copies (a running
// server's) are left out too.
func copyTree(src, dst string, cred *syscall.Credential, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if skip != nil && rel != "." {
			if skip(rel) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, to, info.Mode().Perm()); errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
		default:
			return nil // sockets and the like: none in a data directory
		}
		if cred != nil {
			return os.Lchown(to, int(cred.Uid), int(cred.Gid))
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeOwned writes data to path (mode 0600), owned by cred when set.
func writeOwned(path string, data []byte, cred *syscall.Credential) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}
