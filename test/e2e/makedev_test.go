package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// fakeGo stands for go build -v on a cold cache: it prints three package
// paths as go build -v does, then waits until the test creates the file
// $RELEASE, and then fails with a compiler error when $FAIL is set, or
// writes the -o file.
const fakeGo = `#!/bin/sh
printf 'github.com/a/one\ngithub.com/a/two\ngithub.com/a/three\n' >&2
while [ ! -e "$RELEASE" ]; do sleep 0.05; done
if [ -n "$FAIL" ]; then echo '# github.com/a/three' >&2; echo './three.go:3:1: syntax error' >&2; exit 1; fi
while [ "$1" != -o ]; do shift; done
: > "$2"
`

// make dev's build (target dev-build) never sits silent: it says what it
// does before compiling, then every DEV_TICK seconds how long, how many
// packages and the last one; it passes go build's failure on with the
// compiler's errors in full, and says when it is done.
func TestMakeDevBuildTalks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root := moduleRoot(t)
	for _, fail := range []bool{false, true} {
		dir := t.TempDir()
		goBin := filepath.Join(dir, "go")
		if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
			t.Fatal(err)
		}
		release := filepath.Join(dir, "release")
		cmd := exec.Command("make", "-s", "-C", root, "dev-build", "GO="+goBin, "BIN="+filepath.Join(dir, "bin"), "DEV_TICK=0.2")
		cmd.Env = append(os.Environ(), "RELEASE="+release)
		if fail {
			cmd.Env = append(cmd.Env, "FAIL=1")
		}
		var out testenv.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		testenv.WaitFor(t, time.Minute, "a progress line", func() (bool, error) {
			return strings.Contains(out.String(), ": 3 packages compiled, last github.com/a/three\n"), nil
		})
		if !strings.HasPrefix(out.String(), "make dev: building "+filepath.Join(dir, "bin", "relay")+" (") {
			t.Errorf("dev-build does not say what it does first:\n%s", out.String())
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("make dev-build did not end:\n%s", out.String())
		}
		switch s := out.String(); {
		case fail && (err == nil || !strings.Contains(s, "./three.go:3:1: syntax error") || strings.Contains(s, "built")):
			t.Errorf("failing build: %v, want an error with the compiler's line:\n%s", err, s)
		case !fail && (err != nil || !strings.Contains(s, "make dev: built ")):
			t.Errorf("build: %v, want success and a built line:\n%s", err, s)
		}
	}
}
