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
