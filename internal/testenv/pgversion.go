package testenv

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
)

// PostgresVersionEnv names the environment variable that picks the major
// version of the Postgres servers the tests start: 15, the default
// (Debian's server binaries: /usr/lib/postgresql/15/bin or Homebrew's
// postgresql@15 when installed, whatever PATH holds, else the ones
// pgserver.FindBinDir finds), or
// 16, 17 or 18 (the binaries pinned in test/postgres/pom.xml, fetched with
// Maven into the cache once and unpacked there, as the Kafka jars are).
const PostgresVersionEnv = "PGOUTBOX_TEST_PG"

// DefaultPostgresVersion is the major version the tests start when
// PostgresVersionEnv is unset: Debian's.
const DefaultPostgresVersion = 15

// PostgresVersion returns the major version PostgresVersionEnv asks for,
// DefaultPostgresVersion when it is unset; an error names the versions
// there are.
func PostgresVersion() (int, error) {
	v := os.Getenv(PostgresVersionEnv)
	if v == "" {
		return DefaultPostgresVersion, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || (n != DefaultPostgresVersion && (n < 16 || n > 18)) {
		return 0, fmt.Errorf("%s=%q: want 15, 16, 17 or 18", PostgresVersionEnv, v)
	}
	return n, nil
}

// postgresBinDir returns the directory of the server binaries of the
// version PostgresVersionEnv names: for the default, Debian's 15 when
// installed, else "" (pgserver.FindBinDir finds a server, and
// TestPostgresVersionAsked says if it is another version); else the
// unpacked bundle's bin, fetched and unpacked first if need be. Concurrent
// test binaries take a file lock, so one unpacks and the others wait.
func postgresBinDir(ctx context.Context) (string, error) {
	v, err := PostgresVersion()
	if err != nil {
		return "", err
	}
	if v == DefaultPostgresVersion {
		if dir, err := pgserver.FindBinDirOf(v); err == nil {
			return dir, nil
		}
		return "", nil
	}
	libs, err := mavenLibsOf(ctx, "postgres", fmt.Sprintf("postgres%d.version", v), "postgres.version")
	if err != nil {
		return "", fmt.Errorf("postgres %d: %w", v, err)
	}
	root, err := unpackRoot(filepath.Dir(libs))
	if err != nil {
		return "", fmt.Errorf("postgres %d: %w", v, err)
	}
	err = makeOnce(filepath.Dir(libs), filepath.Join(root, "complete"), func() error {
		if err := unpackBundle(ctx, libs, root); err != nil {
			return fmt.Errorf("postgres %d: unpack the bundle in %s: %w", v, libs, err)
		}
		return nil
	})
	return filepath.Join(root, "bin"), err
}

// unpackRoot is where what the servers read of cacheDir lives (the bundle
// fetched into it, unpacked; a data-directory template): cacheDir/pg, or,
// as root, a directory under the system's temporary directory. As root
// the servers run as the postgres OS user, which must reach it, and a
// home directory (/root) is closed to it.
func unpackRoot(cacheDir string) (string, error) {
	if os.Geteuid() != 0 {
		return filepath.Join(cacheDir, "pg"), nil
	}
	parent := filepath.Join(os.TempDir(), "pgoutbox-postgres-root")
	if err := os.Mkdir(parent, 0o755); err != nil && !os.IsExist(err) {
		return "", err
	}
	// Root runs what is in there: it must be root's alone.
	fi, err := os.Lstat(parent)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 || !ownedByRoot(fi) {
		return "", fmt.Errorf("%s is not a directory that only root can write: remove it", parent)
	}
	return filepath.Join(parent, filepath.Base(cacheDir)), nil
}

// unpackBundle unpacks the .txz inside the jar in libs into root (through
// tar and xz) and marks it complete.
func unpackBundle(ctx context.Context, libs, root string) error {
	jars, _ := filepath.Glob(filepath.Join(libs, "*.jar"))
	if len(jars) != 1 {
		return fmt.Errorf("want one jar, found %d", len(jars))
	}
	if _, err := exec.LookPath("xz"); err != nil {
		return fmt.Errorf("xz not found on PATH: install it (Debian: xz-utils)")
	}
	zr, err := zip.OpenReader(jars[0])
	if err != nil {
		return err
	}
	defer zr.Close()
	var txz *zip.File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, ".txz") {
			txz = f
		}
	}
	if txz == nil {
		return fmt.Errorf("no .txz in %s", jars[0])
	}
	in, err := txz.Open()
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.RemoveAll(root)
	tmp := root + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	tar := exec.CommandContext(ctx, "tar", "-xJf", "-", "-C", tmp)
	tar.Stdin = in
	if out, err := tar.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	// The servers run as another OS user when we are root.
	if out, err := exec.CommandContext(ctx, "chmod", "-R", "a+rX", tmp).CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("chmod: %v: %s", err, out)
	}
	for _, need := range []string{"bin/initdb", "bin/postgres", "bin/pg_ctl", "lib/postgresql/pgoutput.so"} {
		if _, err := os.Stat(filepath.Join(tmp, need)); err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("the bundle has no %s", need)
		}
	}
	if err := os.Rename(tmp, root); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "complete"), nil, 0o644)
}
