package pgserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNotFound is returned when the PostgreSQL server binaries cannot be
// found. Its message says how to install them.
var ErrNotFound = errors.New("PostgreSQL server binaries not found (initdb on PATH, under /usr/lib/postgresql/*/bin or Homebrew's postgresql@*); " +
	"install them with: apt-get install -y postgresql-15 (Debian, Ubuntu) or brew install postgresql@15 (macOS)")

// binGlobs are where FindBinDir looks after PATH: Debian's layout and
// Homebrew's keg-only formulas. Tests point them elsewhere.
var binGlobs = []string{
	"/usr/lib/postgresql/*/bin",
	"/opt/homebrew/opt/postgresql@*/bin",
	"/usr/local/opt/postgresql@*/bin",
}

// Server is a running PostgreSQL server with logical replication enabled.
type Server struct {
	// AdminURL connects as the superuser postgres to the postgres database.
	AdminURL string
	// Dir is the temporary directory holding the data directory, the
	// socket and the log; Stop removes it. Empty for an external server.
	Dir string

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	log    string
	// proc describes how to start the server process again (Restart,
	// StartStandby); nil for an external server.
	proc *proc
	// copies counts CopyData's copies, which it names after it.
	copies int
}

// FindBinDir returns the directory holding initdb and postgres: PATH first,
// then the newest version under binGlobs. The error wraps ErrNotFound.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	var dirs []string
	for _, g := range binGlobs {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNotFound
}

// FindBinDirOf returns the directory of the server binaries of one major
// version under binGlobs (Debian's /usr/lib/postgresql/15/bin, Homebrew's
// postgresql@15), whatever PATH holds: a machine with several versions
// installed (a CI runner's preinstalled one beside the one a test asks
// for) runs the one asked for. The error wraps ErrNotFound.
func FindBinDirOf(major int) (string, error) {
	for _, g := range binGlobs {
		m, _ := filepath.Glob(g)
		for _, d := range m {
			if pgVersion(d) != major {
				continue
			}
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("PostgreSQL %d: %w", major, ErrNotFound)
}

// pgVersion reads the major version from ".../15/bin" or
// ".../postgresql@15/bin".
func pgVersion(binDir string) int {
	name := filepath.Base(filepath.Dir(binDir))
	if _, after, ok := strings.Cut(name, "@"); ok {
		name = after
	}
	v, _ := strconv.Atoi(name)
	return v
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
