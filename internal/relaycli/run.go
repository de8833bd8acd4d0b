package relaycli

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

func runCommand(sc *scrubber) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "stream committed outbox rows to Kafka until stopped",
		Description: "run tails the outbox table through the logical replication slot and publishes every\n" +
			"committed row to Kafka (key aggregate_id, value payload, headers message-id, business-key,\n" +
			"event-type, aggregate-type, aggregate-id), in commit order per aggregate. A missing slot or\n" +
			"publication is created unless --no-create.\n\n" +
			"Delivery is at-least-once. The slot's confirmed position is advanced only past transactions\n" +
			"whose every record Kafka acknowledged (acks=all), as a contiguous prefix; after a crash or\n" +
			"restart the relay resumes from that position, so records in flight at the time are published\n" +
			"again (consumers deduplicate on message-id) and none are lost. Rows that cannot be published\n" +
			"go to --dlq-topic with the reason in headers, or stop the relay with --on-invalid=stop.\n\n" +
			"Stop it with SIGINT or SIGTERM: it flushes what is in flight, confirms the final position and\n" +
			"exits 0. A second Ctrl-C (SIGINT) exits at once without flushing (nothing is lost, more is\n" +
			"replayed); a repeated SIGTERM does not, since GNU timeout and some supervisors signal the\n" +
			"process and then its group (`timeout 10 relay run ...` exits 0): send SIGKILL to force.\n" +
			"--metrics-addr serves /metrics (Prometheus), /healthz (200 while the process runs) and\n" +
			"/readyz (200 while connected and streaming, else 503; /readyz?standby=ok is also 200 while\n" +
			"waiting as a standby, for a readiness probe over a leader and its standbys).\n\n" +
			"A second relay on the same slot is a standby: while the slot is streamed elsewhere it waits,\n" +
			"retrying every --standby-retry-interval, serves the slot metrics with /readyz 503 and\n" +
			"pgoutbox_relay_leader 0, and takes over (from the slot's confirmed position) when the\n" +
			"active relay's connection ends.\n\n" +
			"At every start and reconnect the relay compares the slot and the server with its state row\n" +
			"(pgoutbox_relay_state): a slot missing, re-created or invalidated, or another server or\n" +
			"timeline (a failover), is a gap: it exits 1 naming the slot and since when, streaming nothing,\n" +
			"unless --on-gap=backfill (see relay recover). Only relay setup or a first start with no state\n" +
			"creates the slot.\n\n" +
			"With --config FILE (RELAY_CONFIG) the process relays every source the fleet file lists, each\n" +
			"with its own relay, slot, leader election and metrics (label source); per-source flags then\n" +
			"belong in the file. SIGHUP reloads it; with spread: replicas running one file share the\n" +
			"sources out through a Kafka consumer group. See docs/fleet.md.",
		Flags:  append(append(append(databaseFlags(), runFlags()...), gapFlags()...), configFlag(), fleetBufferFlag()),
		Action: func(c *cli.Context) error { return runAction(c, sc) },
	}
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
	r, err := relay.New(cfg)
	if err != nil {
		// New only validates; it does not connect.
		return err
	}
	setMemoryLimit(memoryLimit(cfg.BufferBytes), "--buffer-bytes", logger)
	ctx := c.Context
	if err := preflight(ctx, cfg); err != nil {
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
