package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
)

// dataTemplate returns the data-directory template (pgserver.InitTemplate)
// of the server binaries in bin, written once into the cache and copied
// by every test binary's shared server after: a copy is a fraction of an
// initdb's work (on our 2-core machine, initdb of 15 took 0.6 to 1.0 s and
// cp -a of its 39 MB 0.1 to 0.4 s; at load 17, 6 to 15 s against 3 to 7).
// The key is the binaries' path, size and modification time, so an
// upgraded or another version's server gets a template of its own. As
// root it lives where the postgres OS user can read it (unpackRoot).
// Concurrent test binaries take a file lock: one writes, the others wait.
func dataTemplate(ctx context.Context, bin string) (string, error) {
	key, err := templateKey(bin)
	if err != nil {
		return "", err
	}
	base, err := cacheBase()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "pgdata-"+key)
	root, err := unpackRoot(dir)
	if err != nil {
		return "", err
	}
	complete := filepath.Join(root, "complete")
	return root, makeOnce(dir, complete, func() error {
		tmp := root + ".tmp"
		_ = os.RemoveAll(tmp)
		if err := pgserver.InitTemplate(ctx, bin, tmp); err != nil {
			return fmt.Errorf("postgres: data-directory template in %s: %w", tmp, err)
		}
		_ = os.RemoveAll(root)
		if err := os.Rename(tmp, root); err != nil {
			return err
		}
		return os.WriteFile(complete, nil, 0o644)
	})
}

// templateKey names the template of the server binaries in bin: their
// path, and the size and modification time of initdb and postgres.
func templateKey(bin string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	// v1: pgserver's initdb flags; a change to them bumps it.
	fmt.Fprintf(h, "initdb-v1 %s\n", abs)
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(abs, name))
		if err != nil {
			return "", fmt.Errorf("postgres: %w", err)
		}
		fmt.Fprintf(h, "%s %d %d\n", name, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)[:6]), nil
}
