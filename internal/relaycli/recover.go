package relaycli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

const (
	flagOnGap          = "on-gap"
	flagBackfillMargin = "backfill-margin"
	flagSince          = "since"
	flagUntil          = "until"
	flagAggregateType  = "aggregate-type"
)

// gapFlags are the flags of run and recover that concern gaps.
func gapFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagOnGap, catDatabase, string(relay.GapStop),
			"when the slot cannot resume where the relay left off (failover, dropped or lost slot): stop (exit 1 naming the gap) or backfill (recover as relay recover does, then stream)"),
		&cli.DurationFlag{Name: flagBackfillMargin, Category: catDatabase, EnvVars: envVar(flagBackfillMargin), Value: relay.DefaultBackfillMargin,
			Usage: "a recovery publishes the rows created since the last confirmed commit time minus this (longer than the longest outbox transaction plus clock skew); pruning keeps them"},
	}
}

// gapConfig reads the gap flags into cfg.
func gapConfig(c *cli.Context, cfg *relay.Config) error {
	switch p := relay.GapPolicy(c.String(flagOnGap)); p {
	case relay.GapStop, relay.GapBackfill:
		cfg.OnGap = p
	default:
		return usagef("--%s: %q is not one of %s, %s", flagOnGap, p, relay.GapStop, relay.GapBackfill)
	}
	if cfg.BackfillMargin = c.Duration(flagBackfillMargin); cfg.BackfillMargin <= 0 {
		return usagef("--%s: must be positive", flagBackfillMargin)
	}
	return nil
}

func recoverCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name:   "recover",
		Flags:  append(append(databaseFlags(), publishFlags()...), gapFlags()...),
		Action: func(c *cli.Context) error { return recoverAction(c, sc) },
	})
}

// streamConfig is the prologue of relay run and relay recover: no stray
// arguments, every publishing and gap flag valid, and those more reads
// (relay run's own flags), then the warning about secrets given as flags.
func streamConfig(c *cli.Context, sc *scrubber, more ...func(*cli.Context, *relay.Config) error) (*relay.Config, error) {
	cfg, err := readStreamConfig(c, sc, more...)
	if err != nil {
		return nil, err
	}
	warnSecretFlags(sc, cfg.Logger)
	return cfg, nil
}

// readStreamConfig is streamConfig without the warnings: a fleet file's
// sources are parsed with it, their secrets never on a command line.
func readStreamConfig(c *cli.Context, sc *scrubber, more ...func(*cli.Context, *relay.Config) error) (*relay.Config, error) {
	if err := noArgs(c); err != nil {
		return nil, err
	}
	cfg, err := runConfig(c, sc)
	if err != nil {
		return nil, err
	}
	for _, read := range append([]func(*cli.Context, *relay.Config) error{gapConfig}, more...) {
		if err := read(c, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func recoverAction(c *cli.Context, sc *scrubber) error {
	cfg, err := streamConfig(c, sc)
	if err != nil {
		return err
	}
	res, err := relay.Recover(c.Context, cfg)
	if err != nil {
		return fail(err)
	}
	w := c.App.Writer
	if res.Gap == nil {
		fmt.Fprintf(w, "slot %s: no gap, nothing to recover\n", cfg.Slot)
		return nil
	}
	fmt.Fprintf(w, "slot %s: recovered a gap (%s): published %d outbox rows created since %s (%d more were in %s already); relay run streams from %s\n",
		cfg.Slot, res.Gap.Reason, res.Published, res.Since.UTC().Format(time.RFC3339), res.AlreadyHeld, brokerName(cfg.Sink), res.SlotLSN)
	if res.Gap.MessagesSeen {
		fmt.Fprintf(w, "slot %s: events written as logical messages (EmitTx) after %s were not recovered\n",
			cfg.Slot, res.Gap.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

func backfillCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name: "backfill",
		Flags: append(append(databaseFlags(), publishFlags()...),
			&cli.StringFlag{Name: flagSince, EnvVars: envVar(flagSince), Usage: "publish rows created at or after this time (required)"},
			&cli.StringFlag{Name: flagUntil, EnvVars: envVar(flagUntil), Usage: "publish rows created before this time (default: no bound)"},
			&cli.StringFlag{Name: flagAggregateType, EnvVars: envVar(flagAggregateType), Usage: "publish only rows of this aggregate type"},
		),
		Action: func(c *cli.Context) error { return backfillAction(c, sc) },
	})
}

func backfillAction(c *cli.Context, sc *scrubber) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cfg, err := runConfig(c, sc)
	if err != nil {
		return err
	}
	now := time.Now()
	opts := relaytype.BackfillOptions{AggregateType: c.String(flagAggregateType)}
	if c.String(flagSince) == "" {
		return usagef("--%s is required", flagSince)
	}
	if opts.Since, err = parseTime(c.String(flagSince), now); err != nil {
		return usagef("--%s: %v", flagSince, err)
	}
	if u := c.String(flagUntil); u != "" {
		if opts.Until, err = parseTime(u, now); err != nil {
			return usagef("--%s: %v", flagUntil, err)
		}
		if !opts.Until.After(opts.Since) {
			return usagef("--%s must be after --%s", flagUntil, flagSince)
		}
	}
	opts.Progress = func(n int, at time.Time) {
		cfg.Logger.Info("backfill progress", "published", n, "created_at", at.UTC().Format(time.RFC3339Nano))
	}
	warnSecretFlags(sc, cfg.Logger)
	n, err := relay.Backfill(c.Context, cfg, opts)
	if err != nil {
		return fail(fmt.Errorf("backfill stopped after %d rows: %w", n, err))
	}
	fmt.Fprintf(c.App.Writer, "published %d outbox rows\n", n)
	return nil
}

// parseTime reads an RFC 3339 time, or a duration meaning that long before
// now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration (90m)", s)
}

// brokerName is the name of the broker sink names, for a message.
func brokerName(sink string) string {
	switch sink {
	case "", sinkKafka:
		return "Kafka"
	case sinkNATS:
		return "NATS"
	case sinkRabbitMQ:
		return "RabbitMQ"
	}
	return sink
}
