package relaycli

import (
	"context"
	"errors"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/preflight"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Exit codes returned by Run.
const (
	ExitOK      = cliutil.ExitOK
	ExitFailure = cliutil.ExitFailure
	ExitUsage   = cliutil.ExitUsage
)

// failure marks an error that happened at run time (exit 1). Every other
// error, including those urfave/cli returns for bad flags, is a usage error
// (exit 2).
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// fail wraps err as a runtime failure, a failed connection worded by
// preflight.ConnectError; nil stays nil.
func fail(err error) error {
	if err == nil {
		return nil
	}
	return failure{preflight.ConnectError(err)}
}

// usagef returns a usage error (exit 2).
func usagef(format string, args ...any) error {
	return cliutil.Usagef(format, args...)
}

// exitCode maps an error of a command to the exit code.
func exitCode(err error) int {
	var f failure
	if errors.As(err, &f) && !errors.Is(err, relaytype.ErrConfig) {
		return ExitFailure
	}
	return ExitUsage
}

// Run runs the relay CLI with args (without the program name), writing
// command output to stdout and logs and errors to stderr, and returns the
// process exit code. Flags go before or after the command. Cancelling ctx
// stops `relay run` gracefully.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The scrubber learns the database password while flags are read, so
	// even an error from the flag parser cannot print it.
	sc := &scrubber{}
	p := &cliutil.Program{App: newApp(stdout, stderr, sc), Code: exitCode, Clean: sc.String}
	return p.Run(ctx, args)
}

func newApp(stdout, stderr io.Writer, sc *scrubber) *cli.App {
	return &cli.App{
		Name:  "relay",
		Usage: "publish committed Postgres outbox rows to Kafka, at-least-once (exactly-once with relay run --exactly-once)",
		Description: "The relay tails the outbox table through Postgres logical replication (a slot and a\n" +
			"publication, pgoutput) and publishes every committed row to Kafka, in commit order per\n" +
			"aggregate. Every flag can also be set with the RELAY_* environment variable shown next to it;\n" +
			"flags go after the command (relay run --brokers ...) or before it. relay help CMD\n" +
			"shows a command's flags; relay --version the build.\n\n" +
			"Exit codes: 0 ok, 1 runtime failure (unreachable database or broker, missing slot, ...),\n" +
			"2 bad usage or configuration.",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: append([]*cli.Command{
			runCommand(sc),
			setupCommand(sc),
			statusCommand(sc),
			teardownCommand(sc),
			recoverCommand(sc),
			backfillCommand(sc),
			verifyCommand(sc),
		}, devCommands(sc)...),
	}
}

// noArgs rejects positional arguments, which urfave/cli would otherwise
// ignore silently.
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("%s: unexpected argument %q (this command takes none)", c.Command.Name, c.Args().First())
	}
	return nil
}
