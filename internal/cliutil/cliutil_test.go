package cliutil

import (
	"bytes"
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox"
)

// testApp has a command with a value flag, a bool flag and arguments.
func testApp(stdout, stderr *bytes.Buffer, got *[]string) *cli.App {
	return &cli.App{
		Name:      "tool",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{{
			Name:      "do",
			Usage:     "do it",
			ArgsUsage: "ID...",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "database-url"},
				&cli.BoolFlag{Name: "json"},
				&cli.GenericFlag{Name: "buffer", Value: NewSize(1 << 20)},
				&cli.GenericFlag{Name: "wait", Value: NewDuration(time.Second)},
			},
			Action: func(c *cli.Context) error {
				*got = append([]string{c.String("database-url"), formatSize(SizeFlagValue(c, "buffer")), c.Duration("wait").String()},
					c.Args().Slice()...)
				if c.Bool("json") {
					*got = append(*got, "json")
				}
				if c.Args().First() == "fail" {
					return errors.New("tool: kafka.(*Client).Metadata: dial tcp: refused")
				}
				return nil
			},
		}, {Name: "other", Usage: "other"}},
	}
}

func run(args ...string) (code int, got []string, stdout, stderr string) {
	var out, errOut bytes.Buffer
	p := &Program{App: testApp(&out, &errOut, &got)}
	code = p.Run(context.Background(), args)
	return code, got, out.String(), errOut.String()
}

func TestFlagsBeforeAndAfterTheCommand(t *testing.T) {
	for _, args := range [][]string{
		{"do", "--database-url", "u", "--json", "a", "b"},
		{"--database-url", "u", "do", "--json", "a", "b"},
		{"--database-url=u", "--json", "do", "a", "b"},
		{"do", "a", "--database-url", "u", "b", "--json"},
		{"do", "--json", "--database-url", "u", "--", "a", "b"},
	} {
		code, got, _, errOut := run(args...)
		if code != 0 || strings.Join(got, " ") != "u 1MiB 1s a b json" {
			t.Errorf("%q: exit %d, got %q, stderr %q", args, code, got, errOut)
		}
	}
}

func TestSizesAndDurations(t *testing.T) {
	for in, want := range map[string]string{"64MiB": "64MiB", "64 MiB": "64MiB", "64MB": "62500KiB", "67108864": "64MiB", "1kb": "1000", "2gib": "2GiB"} {
		if code, got, _, errOut := run("do", "--buffer", in); code != 0 || got[1] != want {
			t.Errorf("--buffer %s: exit %d, got %q, stderr %q; want %s", in, code, got, errOut, want)
		}
	}
	code, _, _, errOut := run("do", "--buffer", "64m")
	if code != ExitUsage || errOut != "tool: --buffer \"64m\": want a size in bytes, such as 1048576, 64MiB or 64MB\n" {
		t.Errorf("bad size: exit %d, stderr %q", code, errOut)
	}
	code, _, _, errOut = run("do", "--wait", "5")
	if code != ExitUsage || errOut != "tool: --wait \"5\": want a duration with a unit, such as 250ms, 5s, 1m30s or 2h\n" {
		t.Errorf("bad duration: exit %d, stderr %q", code, errOut)
	}
}

func TestUsageAndFailureLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"bogus"}, ExitUsage, `tool: unknown command "bogus" (commands: do, other; see tool --help)`},
		{[]string{"help", "bogus"}, ExitUsage, `tool: unknown command "bogus" (commands: do, other; see tool --help)`},
		{[]string{"do", "--nope"}, ExitUsage, "tool: unknown flag --nope"},
		{[]string{}, ExitUsage, "tool: a command is required (do, other)"},
		{[]string{"do", "fail"}, ExitFailure, "tool: dial tcp: refused"},
	} {
		code, _, _, errOut := run(tc.args...)
		if code != tc.code || errOut != tc.line+"\n" {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, %q", tc.args, code, errOut, tc.code, tc.line)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"help", "do"}, {"do", "--help"}, {"do", "-h"}} {
		code, _, out, errOut := run(args...)
		if code != 0 || !strings.Contains(out, "--database-url") || !strings.Contains(out, "--buffer") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, _, out, _ := run("help"); code != 0 || !strings.Contains(out, "other") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	if code, _, out, _ := run("--version"); code != 0 || !strings.HasPrefix(out, "tool ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	if code, _, out, _ := run("--help"); code != 0 || !strings.Contains(out, "--version") {
		t.Errorf("--help does not list --version: exit %d, %q", code, out)
	}
}

func TestFormatVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
	}}
	if got, want := formatVersion(bi), "v0.1.0 (revision 0123456789ab (dirty) of 2026-11-30T12:00:00Z, go1.26.0)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A local build, with no tag: the source tree's VERSION.
	for _, local := range []string{"", "(devel)", "v0.0.0-20261201224549-460f8d17f3b4", "v0.0.0-20261201224549-460f8d17f3b4+dirty"} {
		got := formatVersion(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: local}})
		if want := pgoutbox.Version + " (go1.26.0)"; got != want || !strings.HasPrefix(got, "v0.") {
			t.Errorf("module version %q: got %q, want %q", local, got, want)
		}
	}
	// make release's VERSION wins over the pseudo-version that a build in a
	// git checkout stamps (Go 1.24 and later).
	defer func(v string) { releaseVersion = v }(releaseVersion)
	releaseVersion = "v0.1.0"
	bi.Main.Version = "v0.0.0-20261130120000-0123456789ab+dirty"
	if got, want := formatVersion(bi), "v0.1.0 (revision 0123456789ab (dirty) of 2026-11-30T12:00:00Z, go1.26.0)"; got != want {
		t.Errorf("release build: got %q, want %q", got, want)
	}
}
