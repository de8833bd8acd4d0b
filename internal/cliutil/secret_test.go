package cliutil_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
)

// readSecret runs a one-flag app with args and returns what ReadSecret
// made of --pw (environment variable TEST_PW).
func readSecret(t *testing.T, args ...string) (cliutil.Secret, error) {
	t.Helper()
	var got cliutil.Secret
	var gotErr error
	app := &cli.App{Name: "t", Flags: []cli.Flag{&cli.StringFlag{Name: "pw", EnvVars: []string{"TEST_PW"}}},
		Action: func(c *cli.Context) error {
			got, gotErr = cliutil.ReadSecret(c, "pw", "TEST_PW")
			return nil
		}}
	if err := app.RunContext(context.Background(), append([]string{"t"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got, gotErr
}

// Not parallel: it sets environment variables.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if s, err := readSecret(t, "--pw", "from-flag"); err != nil || s.Value != "from-flag" || !s.OnCommandLine {
		t.Errorf("flag: %+v %v", s, err)
	}
	t.Setenv("TEST_PW_FILE", file)
	if s, err := readSecret(t); err != nil || s.Value != "from-file" || s.OnCommandLine {
		t.Errorf("file: %+v %v, want from-file without the newline", s, err)
	}
	t.Setenv("TEST_PW", "from-env")
	if _, err := readSecret(t); !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "TEST_PW or TEST_PW_FILE") {
		t.Errorf("env and file: %v, want a usage error naming both", err)
	}
	os.Unsetenv("TEST_PW_FILE")
	if s, err := readSecret(t); err != nil || s.Value != "from-env" || s.OnCommandLine {
		t.Errorf("env: %+v %v", s, err)
	}
	os.Unsetenv("TEST_PW")
	t.Setenv("TEST_PW_FILE", filepath.Join(dir, "missing"))
	if _, err := readSecret(t); !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "TEST_PW_FILE") {
		t.Errorf("missing file: %v, want a usage error naming TEST_PW_FILE", err)
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_PW_FILE", file)
	if _, err := readSecret(t); !cliutil.IsUsage(err) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v, want a usage error", err)
	}
}
