package inboxcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"
)

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

var parsing sync.Mutex

// usageError marks bad arguments (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Run runs the inbox command with args (without the program name), writing
// results to stdout and one clear error line to stderr. It returns the exit
// code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// urfave/cli v2 writes to its global HelpFlag while parsing flags, so
	// concurrent Runs (tests) take turns until a command's action starts.
	parsing.Lock()
	release := sync.OnceFunc(parsing.Unlock)
	defer release()
	app := newApp(stdout, stderr)
	for _, cmd := range app.Commands {
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			release()
			return action(c)
		}
	}
	err := app.RunContext(ctx, append([]string{"inbox"}, args...))
	if err == nil {
		return ExitOK
	}
	// One line, whatever the error text holds (pgconn lists every address
	// it tried on its own line).
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(stderr, "inbox: %s\n", msg)
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "inbox",
		Usage: "administer the pgoutbox inbox (consumer-side deduplication table)",
		Description: "The inbox records every Kafka message a consumer handled, keyed by (consumer, message_id) and\n" +
			"(consumer, business_key), with its status: RECEIVED, PROCESSING, COMPLETED, FAILED_RETRYABLE,\n" +
			"FAILED_FINAL. These commands create the table, report on it, apply retention, revive\n" +
			"dead-lettered messages and tail topics through it. Every flag also reads an INBOX_* variable.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {}, // Run maps errors to exit codes
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "database-url", EnvVars: []string{"INBOX_DATABASE_URL"},
				Usage: "PostgreSQL connection URL (postgres://user:pass@host/db)"},
			&cli.StringFlag{Name: "table", EnvVars: []string{"INBOX_TABLE"}, Value: "public.inbox",
				Usage: "inbox table, \"table\" or \"schema.table\""},
			&cli.StringFlag{Name: "log-level", EnvVars: []string{"INBOX_LOG_LEVEL"}, Value: "warn",
				Usage: "log level on stderr: debug, info, warn, error"},
		},
		Commands: []*cli.Command{
			migrateCommand(),
			statusCommand(),
			purgeCommand(),
			listCommand(),
			reviveCommand(),
			tailCommand(),
		},
	}
}

// connect opens a pool on --database-url.
func connect(c *cli.Context) (*pgxpool.Pool, error) {
	url := c.String("database-url")
	if url == "" {
		return nil, usagef("--database-url (INBOX_DATABASE_URL) is required")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn redacts the password in its parse errors.
		return nil, usagef("--database-url: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(c.Context, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", safeTarget(cfg), err)
	}
	if err := pool.Ping(c.Context); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", safeTarget(cfg), err)
	}
	return pool, nil
}

// safeTarget names a database without its password.
func safeTarget(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	return fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
}

func logger(c *cli.Context) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usagef("--log-level: %v", err)
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: lvl})), nil
}

// parseAge parses a Go duration or a number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("bad age %q: want a positive duration such as 72h or 30d", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad age %q: want a positive duration such as 72h or 30d", s)
	}
	return v, nil
}
