package relaycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Exit codes returned by Run.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// failure marks an error that happened at run time (exit 1). Every other
// error, including those urfave/cli returns for bad flags, is a usage error
// (exit 2).
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }
func (f failure) Unwrap() error { return f.err }

// fail wraps err as a runtime failure; nil stays nil.
func fail(err error) error {
	if err == nil {
		return nil
	}
	return failure{err}
}

// usagef returns a usage error (exit 2).
func usagef(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// Run runs the relay CLI with args (without the program name), writing
// command output to stdout and logs and errors to stderr, and returns the
// process exit code. Cancelling ctx stops `relay run` gracefully.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The scrubber learns the database password while flags are read, so
	// even an error from the flag parser cannot print it.
	sc := &scrubber{}
	app := newApp(stdout, stderr, sc)
	err := app.RunContext(ctx, append([]string{"relay"}, args...))
	if err == nil {
		return ExitOK
	}
	line := strings.Join(strings.Fields(sc.String(err.Error())), " ")
	// Engine errors carry the package prefix already.
	line = strings.TrimPrefix(line, "relay: ")
	fmt.Fprintf(stderr, "relay: %s\n", line)
	var f failure
	if errors.As(err, &f) && !errors.Is(err, relay.ErrConfig) {
		return ExitFailure
	}
	return ExitUsage
}

func newApp(stdout, stderr io.Writer, sc *scrubber) *cli.App {
	usageErr := func(_ *cli.Context, err error, _ bool) error { return err }
	app := &cli.App{
		Name:  "relay",
		Usage: "publish committed Postgres outbox rows to Kafka, at-least-once",
		Description: "The relay tails the outbox table through Postgres logical replication (a slot and a\n" +
			"publication, pgoutput) and publishes every committed row to Kafka, in commit order per\n" +
			"aggregate. Every flag can also be set with the RELAY_* environment variable shown next to it.\n\n" +
			"Exit codes: 0 ok, 1 runtime failure (unreachable database or broker, missing slot, ...),\n" +
			"2 bad usage or configuration.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    usageErr,
		ExitErrHandler:  func(*cli.Context, error) {},
		Commands: []*cli.Command{
			runCommand(sc),
			setupCommand(sc),
			statusCommand(sc),
			teardownCommand(sc),
			recoverCommand(sc),
			backfillCommand(sc),
			devCommand(sc),
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q (commands: run, setup, status, teardown, recover, backfill, dev; see relay --help)", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("a command is required (run, setup, status, teardown, recover, backfill, dev)")
		},
	}
	for _, cmd := range app.Commands {
		cmd.OnUsageError = usageErr
		// The stock help subcommand is a shared package variable that
		// urfave/cli writes to; concurrent CLIs in one process would race.
		cmd.HideHelpCommand = true
	}
	return app
}

// noArgs rejects positional arguments, which urfave/cli would otherwise
// ignore silently (for example a flag after an argument).
func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("%s: unexpected argument %q (flags go before arguments; this command takes none)", c.Command.Name, c.Args().First())
	}
	return nil
}
