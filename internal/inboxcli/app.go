package inboxcli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Exit codes of Run.
const (
	ExitOK      = cliutil.ExitOK
	ExitFailure = cliutil.ExitFailure
	ExitUsage   = cliutil.ExitUsage
)

// usageError marks bad arguments (exit code 2).
type usageError = cliutil.UsageError

func usagef(format string, args ...any) error { return cliutil.Usagef(format, args...) }

// Run runs the inbox command with args (without the program name), writing
// results to stdout and one clear error line to stderr. Flags go before or
// after the command. It returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p := &cliutil.Program{App: newApp(stdout, stderr)}
	return p.Run(ctx, args)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "inbox",
		Usage: "administer the pgoutbox inbox (consumer-side deduplication table)",
		Description: "The inbox records every Kafka message a consumer handled, keyed by (consumer, message_id) and\n" +
			"(consumer, business_key), with its status: " + statusList() + ".\n" +
			"These commands create the table, report on it, apply retention, revive dead-lettered\n" +
			"messages and tail topics through it. Every command takes --database-url (INBOX_DATABASE_URL),\n" +
			"--table (INBOX_TABLE) and --log-level (INBOX_LOG_LEVEL), after the command or before it;\n" +
			"every flag also reads an INBOX_* variable. inbox help CMD shows a command's flags.\n\n" +
			"Exit codes: 0 ok, 1 runtime failure (unreachable database or broker, nothing matched an\n" +
			"explicit message ID), 2 bad usage.",
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			migrateCommand(),
			statusCommand(),
			purgeCommand(),
			listCommand(),
			reviveCommand(),
			tailCommand(),
		},
	}
	for _, cmd := range app.Commands {
		cmd.Flags = append(commonFlags(), cmd.Flags...)
	}
	return app
}

// commonFlags are taken by every command. Flags are built afresh per run:
// urfave/cli stores parsed values in them.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("database-url", "", "PostgreSQL connection URL (postgres://user:pass@host/db; required, its password is never printed). Prefer INBOX_DATABASE_URL or INBOX_DATABASE_URL_FILE (a file holding it): a flag is visible in ps"),
		stringFlag("table", inbox.DefaultTable, "inbox table, \"table\" or \"schema.table\""),
		stringFlag("log-level", "warn", "log level on stderr: debug, info, warn or error"),
	}
}

// statusList names every inbox status, for help and errors.
func statusList() string {
	statuses := inbox.Statuses()
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// connect opens a pool on --database-url.
func connect(c *cli.Context) (*pgxpool.Pool, error) {
	secret, err := cliutil.ReadSecret(c, "database-url", "INBOX_DATABASE_URL")
	if err != nil {
		return nil, err
	}
	url := secret.Value
	if url == "" {
		return nil, usagef("--database-url (INBOX_DATABASE_URL) is required")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn redacts the password only as far as it could parse
		// the string: the error shows none of it.
		return nil, usagef("--database-url: %v", redact.ParseError(url, err))
	}
	if cliutil.URLExposed(secret) {
		if log, err := logger(c); err == nil {
			cliutil.WarnSecretFlag(log, "database-url", "INBOX_DATABASE_URL")
		}
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
		return nil, usagef("--log-level: %q is not one of debug, info, warn, error", c.String("log-level"))
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
