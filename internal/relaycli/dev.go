//go:build !nodev

package relaycli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Names of the demo's objects. They live in their own schema, so that
// --database-url may point at a server holding other data.
const (
	devSchema      = "pgoutbox_dev"
	devSlot        = "pgoutbox_dev"
	devPublication = "pgoutbox_dev"
	devTopic       = "outbox.order"
	devConsumer    = "dev-shipping"
	devGroup       = "pgoutbox-dev"
	devPartitions  = 4
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
)

// drainTimeouts bound how long `relay dev` waits, once the producer has
// stopped, for everything written to be published and consumed.
const (
	drainAfterDuration  = 30 * time.Second
	drainAfterInterrupt = 5 * time.Second
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
			devSchema + ".orders and its order.placed event into " + devSchema + ".outbox (pkg/outbox).\n" +
			"The relay publishes the events to topic " + devTopic + ". The consumer (pkg/inbox, consumer\n" +
			"\"" + devConsumer + "\") inserts one row per order into " + devSchema + ".shipments in the inbox's\n" +
			"transaction. To show deduplication at work, the demo redelivers --redeliver already\n" +
			"consumed messages per second to the inbox, as Kafka does when a consumer dies between its\n" +
			"database commit and its offset commit: the inbox answers Duplicate and nothing is shipped\n" +
			"twice. Relay restarts would add more duplicates of the same kind.\n\n" +
			"At the end (--duration, or Ctrl-C) the producer stops, the demo waits for the rest to be\n" +
			"published and consumed, and prints a summary line:\n" +
			"  summary: written=N published=N consumed=N duplicates=M shipments=N double_shipments=0 missing=0 result=ok\n" +
			"then removes everything it started: the server and its directory, or, with --database-url,\n" +
			"the slot, the publication and the " + devSchema + " schema (unless --keep).\n" +
			"With --duration, an inconsistent result exits 1. A second Ctrl-C exits at once: the\n" +
			"throwaway server dies with the process (Linux), but its temporary directory stays behind.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: flagDatabaseURL, EnvVars: devEnvVar(flagDatabaseURL),
				Usage: "use this server (superuser or replication rights, wal_level=logical) instead of a throwaway one; the demo works in schema " + devSchema},
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
				Usage: "with --database-url: keep the " + devSchema + " schema at exit (the slot and publication are dropped anyway)"},
			&cli.StringFlag{Name: flagLogLevel, EnvVars: devEnvVar(flagLogLevel), Value: "warn",
				Usage: "log level of the components on stderr: debug, info, warn or error"},
			&cli.StringFlag{Name: flagLogFormat, EnvVars: devEnvVar(flagLogFormat), Value: "text",
				Usage: "log format on stderr: text or json"},
		},
		Action: func(c *cli.Context) error { return devAction(c, sc) },
	}
}

// devOptions are the validated flags of `relay dev`.
type devOptions struct {
	databaseURL string
	duration    time.Duration
	rate        int
	redeliver   int
	kafkaPort   int
	metricsAddr string
	keep        bool
}

func devAction(c *cli.Context, sc *scrubber) error {
	if err := noArgs(c); err != nil {
		return err
	}
	o := devOptions{
		databaseURL: c.String(flagDatabaseURL),
		duration:    c.Duration(flagDevDuration),
		rate:        c.Int(flagDevRate),
		redeliver:   c.Int(flagDevRedeliver),
		kafkaPort:   c.Int(flagDevKafkaPort),
		metricsAddr: c.String(flagMetricsAddr),
		keep:        c.Bool(flagDevKeep),
	}
	if o.databaseURL != "" {
		sc.addURL(o.databaseURL)
		pg, err := pgconn.ParseConfig(o.databaseURL)
		if err != nil {
			return usagef("--%s: %v", flagDatabaseURL, err)
		}
		sc.add(pg.Password)
	}
	switch {
	case o.duration < 0:
		return usagef("--%s must not be negative", flagDevDuration)
	case o.rate < 1:
		return usagef("--%s must be at least 1, got %d", flagDevRate, o.rate)
	case o.redeliver < 0:
		return usagef("--%s must not be negative", flagDevRedeliver)
	case o.kafkaPort < 0 || o.kafkaPort > 65535:
		return usagef("--%s: %d is not a port", flagDevKafkaPort, o.kafkaPort)
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return err
	}
	return fail(runDev(c.Context, o, c.App.Writer, logger))
}

// runDev runs the demo until o.duration passes or ctx ends, then drains,
// prints the summary and removes what it started.
func runDev(ctx context.Context, o devOptions, out io.Writer, logger *slog.Logger) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, "relay dev: "+format+"\n", args...) }
	// Whatever happens from here on, cleanup runs to the end.
	bg := context.WithoutCancel(ctx)

	url := o.databaseURL
	if url == "" {
		say("starting a throwaway Postgres (initdb, wal_level=logical) ...")
		srv, err := pgserver.Start(ctx)
		if err != nil {
			if errors.Is(err, pgserver.ErrNotFound) {
				return fmt.Errorf("%w; or use --%s with a server that has wal_level=logical", err, flagDatabaseURL)
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("start postgres: %w", err)
		}
		defer srv.Stop()
		url = srv.AdminURL
		say("postgres  %s (throwaway, data in %s, removed at exit)", url, srv.Dir)
	} else {
		say("postgres  %s (schema %s)", relay.RedactURL(url), devSchema)
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(devPartitions),
		kfake.SeedTopics(devPartitions, devTopic),
	}
	if o.kafkaPort > 0 {
		opts = append(opts, kfake.Ports(o.kafkaPort))
	}
	kafkaCluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start the embedded kafka broker: %w", err)
	}
	defer kafkaCluster.Close()
	brokers := kafkaCluster.ListenAddrs()
	say("kafka     %s (embedded kfake broker; watch it: kcat -b %s -C -t %s -f '%%k %%s\\n')", brokers[0], brokers[0], devTopic)

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()

	reg := prometheus.NewRegistry()
	rcfg := &relay.Config{
		DatabaseURL:    url,
		Brokers:        brokers,
		Table:          devSchema + ".outbox",
		Slot:           devSlot,
		Publication:    devPublication,
		StatusInterval: time.Second,
		Logger:         logger,
		Registerer:     reg,
	}
	d := &demo{pool: pool, opts: o, log: logger, reg: reg, relayCfg: rcfg}
	if err := d.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			err = nil
		}
		return errors.Join(err, d.cleanup(bg))
	}
	defer func() { err = errors.Join(err, d.cleanup(bg)) }()

	r, err := relay.New(rcfg)
	if err != nil {
		return err
	}
	in, err := inbox.New(&inbox.Config{Consumer: devConsumer, Table: devSchema + ".inbox", Logger: logger, Registerer: reg})
	if err != nil {
		return err
	}
	d.inbox = in
	consumer, err := inbox.NewConsumer(&inbox.ConsumerConfig{
		Brokers:  brokers,
		GroupID:  devGroup,
		Topics:   []string{devTopic},
		Inbox:    in,
		DB:       pool,
		Handler:  d.ship,
		OnResult: d.remember,
	})
	if err != nil {
		return err
	}
	if o.metricsAddr != "" {
		ms, err := startMetrics(o.metricsAddr, reg, r.Ready, logger)
		if err != nil {
			return fmt.Errorf("--%s: %w", flagMetricsAddr, err)
		}
		defer ms.Close()
		say("metrics   http://%s/metrics", ms.addr)
	}

	say("producer  %d orders/s, each one transaction: an order row in %s.orders and its outbox row", o.rate, devSchema)
	say("consumer  inbox %q ships each order once into %s.shipments; %d consumed messages/s are redelivered on purpose",
		devConsumer, devSchema, o.redeliver)
	if o.duration > 0 {
		say("running for %v (Ctrl-C stops earlier and cleans up)", o.duration)
	} else {
		say("running until Ctrl-C")
	}

	// The relay and the consumer stop only when told, after the drain.
	compCtx, stopComps := context.WithCancel(bg)
	defer stopComps()
	comps, compsCtx := errgroup.WithContext(compCtx)
	comps.Go(func() error { return r.Run(compsCtx) })
	comps.Go(func() error { return consumer.Run(compsCtx) })

	prodCtx, stopProd := context.WithCancel(compsCtx)
	defer stopProd()
	prods, prodsCtx := errgroup.WithContext(prodCtx)
	prods.Go(func() error { return d.produce(prodsCtx) })
	prods.Go(func() error { return d.redeliverLoop(prodsCtx) })

	var deadline <-chan time.Time
	if o.duration > 0 {
		t := time.NewTimer(o.duration)
		defer t.Stop()
		deadline = t.C
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	drain := drainAfterDuration
run:
	for {
		select {
		case <-tick.C:
			d.printStatus(ctx, out, time.Since(start))
		case <-deadline:
			break run
		case <-ctx.Done():
			drain = drainAfterInterrupt
			break run
		case <-compsCtx.Done(): // the relay or the consumer failed
			break run
		case <-prodsCtx.Done(): // the producer failed
			break run
		}
	}
	stopProd()
	prodErr := prods.Wait()
	if prodErr == nil && compsCtx.Err() == nil {
		say("producer stopped; waiting up to %v for the rest to be published and consumed ...", drain)
		d.waitDrained(compsCtx, out, start, drain)
	}
	stopComps()
	if err := errors.Join(comps.Wait(), prodErr); err != nil {
		return err
	}
	s, err := d.summarize(bg)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, s.String())
	if o.duration > 0 && ctx.Err() == nil && !s.ok() {
		return fmt.Errorf("dev: inconsistent result: %s", s.String())
	}
	return nil
}
