//go:build !nodev

package relaycli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/devdemo"
)

// Flags of `relay dev`. Their environment variables are RELAY_DEV_*, never
// RELAY_*: a RELAY_DATABASE_URL meant for `relay run` must not send the demo
// to a production database.
const (
	flagDevDuration  = "duration"
	flagDevRate      = "rate"
	flagDevRedeliver = "redeliver"
	flagDevKafkaPort = "kafka-port"
	flagDevKeep      = "keep"
	flagDevBroker    = "broker-only"
)

func devEnvVar(name string) []string {
	return []string{"RELAY_DEV_" + envVar(name)[0][len("RELAY_"):]}
}

// devCommands is `relay dev`; a build with -tags nodev has none (see
// dev_off.go), and no embedded broker or Postgres launcher either.
func devCommands(sc *scrubber) []*cli.Command { return []*cli.Command{devCommand(sc)} }

func devCommand(sc *scrubber) *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run the whole pipeline locally: Postgres, a Kafka broker, the relay, a producer and an inbox consumer",
		Description: "dev needs only the Postgres server binaries. It starts a throwaway Postgres with\n" +
			"wal_level=logical (or uses --database-url), an embedded Kafka-protocol broker (kfake) on\n" +
			"loopback, the relay, a demo producer and a demo inbox consumer, and prints one status line\n" +
			"per second: written, published, consumed, duplicates suppressed, lag.\n\n" +
			"The producer places --rate orders per second: each transaction inserts an order into\n" +
			devdemo.Schema + ".orders and its order.placed event into " + devdemo.Schema + ".outbox (pkg/outbox).\n" +
			"The relay publishes the events to topic " + devdemo.Topic + ". The consumer (pkg/inbox, consumer\n" +
			"\"" + devdemo.Consumer + "\") inserts one row per order into " + devdemo.Schema + ".shipments in the inbox's\n" +
			"transaction. To show deduplication at work, the demo redelivers --redeliver already\n" +
			"consumed messages per second to the inbox, as Kafka does when a consumer dies between its\n" +
			"database commit and its offset commit: the inbox answers Duplicate and nothing is shipped\n" +
			"twice. Relay restarts would add more duplicates of the same kind.\n\n" +
			"At the end (--duration, or Ctrl-C) the producer stops, the demo waits for the rest to be\n" +
			"published and consumed, and prints a summary line:\n" +
			"  summary: written=N published=N consumed=N duplicates=M shipments=N double_shipments=0 missing=0 result=ok\n" +
			"then removes everything it started: the server and its directory, or, with --database-url,\n" +
			"the slot, the publication and the " + devdemo.Schema + " schema (unless --keep).\n" +
			"A closed stdout (relay dev | head) stops it the same way. With --duration, an\n" +
			"inconsistent result exits 1. A second Ctrl-C exits at once: the\n" +
			"throwaway server dies with the process (Linux), but its temporary directory stays behind.\n\n" +
			"The demo uses topics of its own (" + devdemo.Topic + " and pgoutbox_dev.*_dlq), so a relay of yours may\n" +
			"share its broker. --broker-only serves the embedded broker alone (no Postgres, no demo), for\n" +
			"your own relay and programs: relay dev --broker-only --kafka-port 19092. The broker keeps its\n" +
			"topics in memory: they are gone when it stops.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: flagDevBroker, EnvVars: devEnvVar(flagDevBroker),
				Usage: "serve only the embedded broker (in memory), no Postgres and no demo, until Ctrl-C or --duration"},
			&cli.StringFlag{Name: flagDatabaseURL, EnvVars: devEnvVar(flagDatabaseURL),
				Usage: "use this server (superuser or replication rights, wal_level=logical) instead of a throwaway one; the demo works in schema " + devdemo.Schema},
			&cli.GenericFlag{Name: flagDevDuration, EnvVars: devEnvVar(flagDevDuration),
				Value: cliutil.NewDuration(0),
				Usage: "stop by itself after this long; 0 runs until Ctrl-C"},
			&cli.IntFlag{Name: flagDevRate, EnvVars: devEnvVar(flagDevRate), Value: 20,
				Usage: "orders placed per second, each in its own transaction"},
			&cli.IntFlag{Name: flagDevRedeliver, EnvVars: devEnvVar(flagDevRedeliver), Value: 2,
				Usage: "consumed messages redelivered to the inbox per second, to show duplicates suppressed (0 disables)"},
			&cli.IntFlag{Name: flagDevKafkaPort, EnvVars: devEnvVar(flagDevKafkaPort),
				Usage: "loopback port of the embedded broker; 0 picks a free one"},
			&cli.StringFlag{Name: flagMetricsAddr, EnvVars: devEnvVar(flagMetricsAddr),
				Usage: "serve the relay's and the inbox's metrics on this address, e.g. :9740; empty: off"},
			&cli.BoolFlag{Name: flagDevKeep, EnvVars: devEnvVar(flagDevKeep),
				Usage: "with --database-url: keep the " + devdemo.Schema + " schema at exit (the slot and publication are dropped anyway)"},
			&cli.StringFlag{Name: flagLogLevel, EnvVars: devEnvVar(flagLogLevel), Value: "warn",
				Usage: "log level of the components on stderr: debug, info, warn or error"},
			&cli.StringFlag{Name: flagLogFormat, EnvVars: devEnvVar(flagLogFormat), Value: "text",
				Usage: "log format on stderr: text or json"},
		},
		Action: func(c *cli.Context) error { return devAction(c, sc) },
	}
}

func devAction(c *cli.Context, sc *scrubber) error {
	if err := noArgs(c); err != nil {
		return err
	}
	o := devdemo.Options{
		DatabaseURL: c.String(flagDatabaseURL),
		Duration:    c.Duration(flagDevDuration),
		Rate:        c.Int(flagDevRate),
		Redeliver:   c.Int(flagDevRedeliver),
		KafkaPort:   c.Int(flagDevKafkaPort),
		MetricsAddr: c.String(flagMetricsAddr),
		Keep:        c.Bool(flagDevKeep),
		BrokerOnly:  c.Bool(flagDevBroker),
		Out:         c.App.Writer,
	}
	if o.BrokerOnly {
		for _, f := range []string{flagDatabaseURL, flagDevRate, flagDevRedeliver, flagMetricsAddr, flagDevKeep} {
			if c.IsSet(f) {
				return usagef("--%s runs no demo: --%s does not apply", flagDevBroker, f)
			}
		}
	}
	if o.DatabaseURL != "" {
		sc.addURL(o.DatabaseURL)
		pg, err := pgconn.ParseConfig(o.DatabaseURL)
		if err != nil {
			return usagef("--%s: %v", flagDatabaseURL, err)
		}
		sc.add(pg.Password)
	}
	switch {
	case o.Duration < 0:
		return usagef("--%s must not be negative", flagDevDuration)
	case o.Rate < 1:
		return usagef("--%s must be at least 1, got %d", flagDevRate, o.Rate)
	case o.Redeliver < 0:
		return usagef("--%s must not be negative", flagDevRedeliver)
	case o.KafkaPort < 0 || o.KafkaPort > 65535:
		return usagef("--%s: %d is not a port", flagDevKafkaPort, o.KafkaPort)
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return err
	}
	o.Logger = logger
	// A closed stdout (relay dev | head) stops the demo as Ctrl-C does, so
	// that it removes its server and directory. Without the Notify, Go's
	// default for a broken pipe on fd 1 or 2 kills the process at its next
	// line, leaving both behind.
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	o.Out = &stopOnWriteError{w: c.App.Writer, stop: cancel}
	return fail(devdemo.Run(ctx, o))
}

// stopOnWriteError calls stop when a write fails (the reader of the
// demo's output is gone).
type stopOnWriteError struct {
	w    io.Writer
	stop func()
}

func (s *stopOnWriteError) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		s.stop()
	}
	return n, err
}
