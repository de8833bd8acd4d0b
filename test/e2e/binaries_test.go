package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The commands the tests run are built once per test binary, into one
// directory removed when the binary ends, and shared: every test runs the
// same build, and a go build per test (about 20 of them, each linking the
// relay again into a new directory) cost minutes of CPU on a busy CI
// machine. Tests only run them and put the directory on PATH; none writes
// into it.
var binaries struct {
	dirOnce sync.Once
	dir     string
	dirErr  error

	cmds, bench struct {
		once sync.Once
		err  error
	}
}

// binDir returns the shared directory, made on first use.
func binDir() (string, error) {
	binaries.dirOnce.Do(func() {
		binaries.dir, binaries.dirErr = os.MkdirTemp("", "pgoutbox-e2e-bin-")
		if binaries.dirErr == nil {
			dir := binaries.dir
			testenv.AtExit(func() { _ = os.RemoveAll(dir) })
		}
	})
	return binaries.dir, binaries.dirErr
}

// goBuild builds pkgs into the shared directory once (once guards it) and
// returns the directory; a failed build fails every test that asks.
func goBuild(t testing.TB, once *sync.Once, errp *error, pkgs ...string) string {
	t.Helper()
	dir, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + "/"}, pkgs...)...).CombinedOutput()
		if err != nil {
			*errp = fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
		}
	})
	if *errp != nil {
		t.Fatal(*errp)
	}
	return dir
}

// buildBinaries returns the directory of the relay and inbox commands
// (cmd/relay, cmd/inbox) of this tree.
func buildBinaries(t testing.TB) string {
	t.Helper()
	return goBuild(t, &binaries.cmds.once, &binaries.cmds.err,
		"github.com/pgoutbox/pgoutbox/cmd/relay", "github.com/pgoutbox/pgoutbox/cmd/inbox")
}

// buildRelay returns the path of the relay command of this tree.
func buildRelay(t testing.TB) string {
	t.Helper()
	return filepath.Join(buildBinaries(t), "relay")
}

// buildBenchBinaries returns buildBinaries' directory with relaybench
// (test/bench/relaybench) built into it too.
func buildBenchBinaries(t testing.TB) string {
	t.Helper()
	buildBinaries(t)
	return goBuild(t, &binaries.bench.once, &binaries.bench.err, "github.com/pgoutbox/pgoutbox/test/bench/relaybench")
}
