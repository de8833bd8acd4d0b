package relaycli

import (
	"io"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every relay command has an environment variable, as the
// README promises (--since, --until, --aggregate-type, --json and --yes
// had none).
func TestEveryFlagHasAnEnvVar(t *testing.T) {
	app := newApp(io.Discard, io.Discard, &scrubber{})
	for _, f := range app.Flags {
		checkEnvVar(t, "relay", f)
	}
	for _, cmd := range app.Commands {
		for _, f := range cmd.Flags {
			checkEnvVar(t, "relay "+cmd.Name, f)
		}
	}
}

func checkEnvVar(t *testing.T, where string, f cli.Flag) {
	t.Helper()
	if e, ok := f.(interface{ GetEnvVars() []string }); !ok || len(e.GetEnvVars()) == 0 {
		if f.Names()[0] == "help" || f.Names()[0] == "version" {
			return
		}
		t.Errorf("%s --%s has no environment variable", where, f.Names()[0])
	}
}

// TestCommandsTakeOnlyTheirFlags: backfill and recover publish once and
// exit, so the flags of a streaming relay (pruning, metrics, heartbeat,
// standby, shutdown, slot creation) are refused there, not silently
// ignored; relay run keeps every one.
func TestCommandsTakeOnlyTheirFlags(t *testing.T) {
	app := newApp(io.Discard, io.Discard, &scrubber{})
	names := func(cmd string) map[string]bool {
		m := make(map[string]bool)
		for _, c := range app.Commands {
			if c.Name == cmd {
				for _, f := range c.Flags {
					m[f.Names()[0]] = true
				}
			}
		}
		return m
	}
	run := names("run")
	for _, f := range streamingFlags() {
		name := f.Names()[0]
		if !run[name] {
			t.Errorf("relay run lacks --%s", name)
		}
		for _, cmd := range []string{"backfill", "recover"} {
			if names(cmd)[name] {
				t.Errorf("relay %s takes --%s, a flag of relay run only", cmd, name)
			}
		}
	}
	for _, f := range publishFlags() {
		for _, cmd := range []string{"run", "backfill", "recover"} {
			if !names(cmd)[f.Names()[0]] {
				t.Errorf("relay %s lacks --%s", cmd, f.Names()[0])
			}
		}
	}
}
