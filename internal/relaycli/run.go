package relaycli

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/memlimit"
	"github.com/pgoutbox/pgoutbox/internal/preflight"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

func runCommand(sc *scrubber) *cli.Command {
	return cliutil.WithHelp(helpFiles, &cli.Command{
		Name:   "run",
		Flags:  append(append(append(databaseFlags(), runFlags()...), gapFlags()...), configFlag(), fleetBufferFlag(), strictTopicsFlag(), statusAddrFlag()),
		Action: func(c *cli.Context) error { return runAction(c, sc) },
	})
}

// configFlag is relay run's --config: the fleet file.
func configFlag() cli.Flag {
	return &cli.StringFlag{Name: flagConfig, Category: catOps, EnvVars: envVar(flagConfig),
		Usage: "fleet file (YAML): relay every source it lists in this one process, each with its own slot, leader election and metrics (label source); " +
			"its keys are this command's flag names, under defaults: for all sources and per source under sources: (see docs/fleet.md). SIGHUP reloads it"}
}

func runAction(c *cli.Context, sc *scrubber) error {
	if c.String(flagConfig) != "" {
		return fleetAction(c, sc)
	}
	if c.IsSet(flagFleetBuffer) {
		return usagef("--%s (%s) is a fleet's budget: it needs --%s; a single relay's is --%s", flagFleetBuffer, envName(flagFleetBuffer), flagConfig, flagBufferBytes)
	}
	for _, fl := range []string{flagStrictTopics, flagStatusAddr} {
		if c.IsSet(fl) {
			return usagef("--%s (%s) is a fleet's setting: it needs --%s", fl, envName(fl), flagConfig)
		}
	}
	cfg, err := streamConfig(c, sc, streamingConfig)
	if err != nil {
		return err
	}
	logger := cfg.Logger
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	cfg.Registerer = reg
	hooks, stopTracing, err := startTracing(c, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Hooks = append(cfg.Hooks, hooks...)
	r, err := relay.New(cfg)
	if err != nil {
		// New only validates; it does not connect.
		return err
	}
	memlimit.Set(memlimit.ForBuffer(cfg.BufferBytes), "--buffer-bytes", logger)
	ctx := c.Context
	if err := preflight.Check(ctx, cfg, cfg.Sink == "" || cfg.Sink == sinkKafka); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fail(err)
	}
	if addr := c.String(flagMetricsAddr); addr != "" {
		ms, err := cliutil.ServeMetrics(addr, reg, r, logger)
		if err != nil {
			return fail(errors.Join(errors.New("--"+flagMetricsAddr), err))
		}
		defer ms.Close()
	}
	logger.Info("relay starting", logAttrs(cfg)...)
	if err := r.Run(ctx); err != nil {
		return fail(err)
	}
	logger.Info("relay stopped", slog.String("slot", cfg.Slot))
	return nil
}
