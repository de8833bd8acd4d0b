package devdemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/pgserver"
	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Names of the demo's objects. They live in their own schema and topics,
// so that Options.DatabaseURL may point at a server holding other data, and
// a relay of the user's may share the broker: the demo never writes to the
// default topics (outbox.*, inbox.dlq) nor reads them.
const (
	Schema        = "pgoutbox_dev"
	slot          = "pgoutbox_dev"
	publication   = "pgoutbox_dev"
	Topic         = "pgoutbox_dev.order"
	topicTemplate = "pgoutbox_dev.{aggregate_type}"
	relayDLQ      = "pgoutbox_dev.outbox_dlq"
	inboxDLQ      = "pgoutbox_dev.inbox_dlq"
	Consumer      = "dev-shipping"
	group         = "pgoutbox-dev"
	partitions    = 4
)

// How long the demo waits, once the producer has stopped, for everything
// written to be published and consumed.
const (
	drainAfterDuration  = 30 * time.Second
	drainAfterInterrupt = 5 * time.Second
)

// Options are the settings of a demo run: the flags of `relay dev`.
type Options struct {
	// DatabaseURL is the server to use (superuser or replication rights,
	// wal_level=logical); empty starts a throwaway one.
	DatabaseURL string
	// Duration stops the demo by itself after this long; 0 runs until
	// the context ends.
	Duration time.Duration
	// Rate is the number of orders placed per second, each in its own
	// transaction. At least 1.
	Rate int
	// Redeliver is the number of consumed messages handed to the inbox
	// again per second, to show duplicates suppressed; 0 disables.
	Redeliver int
	// KafkaPort is the loopback port of the embedded broker; 0 picks a
	// free one.
	KafkaPort int
	// MetricsAddr serves the relay's and the inbox's metrics when set.
	MetricsAddr string
	// Keep leaves the Schema in place at exit (with DatabaseURL; the slot
	// and publication are dropped anyway).
	Keep bool
	// Logger receives the components' logs.
	Logger *slog.Logger
	// BrokerOnly serves the embedded broker alone, with no Postgres and no
	// demo, for a relay and programs of the user's.
	BrokerOnly bool
	// Out receives the demo's lines: what runs where, a status line per
	// second and the summary.
	Out io.Writer
}

// Run runs the demo until o.Duration passes or ctx ends, then drains,
// prints the summary and removes what it started. With o.Duration set, an
// inconsistent result is an error.
func Run(ctx context.Context, o Options) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, "relay dev: "+format+"\n", args...) }
	if o.BrokerOnly {
		return serveBroker(ctx, o, say)
	}
	url, stopPostgres, err := startPostgres(ctx, o.DatabaseURL, say)
	if err != nil || url == "" {
		return err
	}
	defer stopPostgres()
	cluster, err := startKafka(o.KafkaPort, say)
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	d := newDemo(pool, o, url, brokers)
	// Whatever happens from here on, cleanup runs to the end.
	bg := context.WithoutCancel(ctx)
	if err := d.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			err = nil
		}
		return errors.Join(err, d.cleanup(bg))
	}
	defer func() { err = errors.Join(err, d.cleanup(bg)) }()

	r, consumer, err := d.components(brokers)
	if err != nil {
		return err
	}
	if o.MetricsAddr != "" {
		ms, err := cliutil.ServeMetrics(o.MetricsAddr, d.reg, r, o.Logger)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer ms.Close()
		say("metrics   http://%s/metrics", ms.Addr)
	}
	d.announce(say)
	return d.run(ctx, r, consumer, say)
}

// startPostgres returns url, or starts a throwaway server when it is empty
// and returns its URL and how to stop it. The URL is empty, with no error,
// when ctx ended while the server started.
func startPostgres(ctx context.Context, url string, say func(string, ...any)) (string, func(), error) {
	if url != "" {
		say("postgres  %s (schema %s)", redact.URL(url), Schema)
		return url, func() {}, nil
	}
	say("starting a throwaway Postgres (initdb, wal_level=logical) ...")
	srv, err := pgserver.StartPrivate(ctx) // no TCP: its superuser trusts whoever connects
	switch {
	case errors.Is(err, pgserver.ErrNotFound):
		return "", nil, fmt.Errorf("%w; or use --database-url with a server that has wal_level=logical", err)
	case err != nil && ctx.Err() != nil:
		return "", nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("start postgres: %w", err)
	}
	say("postgres  %s (throwaway, data in %s, removed at exit)", srv.AdminURL, srv.Dir)
	return srv.AdminURL, srv.Stop, nil
}

// serveBroker serves the embedded broker alone until o.Duration passes or
// ctx ends.
func serveBroker(ctx context.Context, o Options, say func(string, ...any)) error {
	cluster, err := newBroker(o.KafkaPort, kfake.SeedTopics(partitions, relay.DefaultDeadLetterTopic, inbox.DefaultDeadLetterTopic))
	if err != nil {
		return err
	}
	defer cluster.Close()
	b := cluster.ListenAddrs()[0]
	say("kafka     %s (embedded kfake broker, no demo; topics are created on first use with %d partitions)", b, partitions)
	say("the broker keeps its topics in memory: they are gone when it stops, and relays and consumers using it then retry until it is back (empty)")
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	} else {
		<-ctx.Done()
	}
	return nil
}

// startKafka starts the embedded broker on port (0: a free one) with the
// demo's topic.
func startKafka(port int, say func(string, ...any)) (*kfake.Cluster, error) {
	cluster, err := newBroker(port, kfake.SeedTopics(partitions, Topic))
	if err != nil {
		return nil, err
	}
	b := cluster.ListenAddrs()[0]
	say("kafka     %s (embedded kfake broker, in memory; watch it: kcat -b %s -C -t %s -f '%%k %%s\\n')", b, b, Topic)
	return cluster, nil
}

// newBroker starts the embedded broker on port (0: a free one); topics are
// created on first use.
func newBroker(port int, opts ...kfake.Opt) (*kfake.Cluster, error) {
	opts = append(opts, kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(partitions))
	if port > 0 {
		opts = append(opts, kfake.Ports(port))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start the embedded kafka broker: %w", err)
	}
	return cluster, nil
}

// newDemo configures the demo on pool: the relay's settings and a registry
// for every component's metrics.
func newDemo(pool *pgxpool.Pool, o Options, url string, brokers []string) *demo {
	reg := prometheus.NewRegistry()
	return &demo{pool: pool, opts: o, log: o.Logger, reg: reg, relayCfg: &relay.Config{
		DatabaseURL:     url,
		Kafka:           relay.KafkaConfig{Brokers: brokers},
		Table:           Schema + ".outbox",
		TopicTemplate:   topicTemplate,
		DeadLetterTopic: relayDLQ,
		Slot:            slot,
		Publication:     publication,
		StatusInterval:  time.Second,
		Logger:          o.Logger,
		Registerer:      reg,
	}}
}

// components creates the relay and the inbox consumer, which ships each
// order (see ship).
func (d *demo) components(brokers []string) (*relay.Relay, *inboxkafka.Consumer[pgx.Tx], error) {
	r, err := relay.New(d.relayCfg)
	if err != nil {
		return nil, nil, err
	}
	in, err := inbox.New(inbox.Pgx(d.pool), &inbox.Config{Consumer: Consumer, Table: Schema + ".inbox", Logger: d.log, Registerer: d.reg})
	if err != nil {
		return nil, nil, err
	}
	d.inbox = in
	consumer, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:         brokers,
		GroupID:         group,
		Topics:          []string{Topic},
		DeadLetterTopic: inboxDLQ,
		Inbox:           in,
		Handler:         d.ship,
		OnResult:        d.remember,
	})
	if err != nil {
		return nil, nil, err
	}
	return r, consumer, nil
}

// announce says what the producer and the consumer do, and for how long.
func (d *demo) announce(say func(string, ...any)) {
	say("producer  %d orders/s, each one transaction: an order row in %s.orders and its outbox row", d.opts.Rate, Schema)
	say("consumer  inbox %q ships each order once into %s.shipments; %d consumed messages/s are redelivered on purpose",
		Consumer, Schema, d.opts.Redeliver)
	if d.opts.Duration > 0 {
		say("running for %v (Ctrl-C stops earlier and cleans up)", d.opts.Duration)
	} else {
		say("running until Ctrl-C")
	}
}

// run runs the relay, the consumer, the producer and the redeliveries until
// the end (see watch), then stops the producer, waits for the rest to be
// published and consumed, stops the relay and the consumer and prints the
// summary.
func (d *demo) run(ctx context.Context, r *relay.Relay, consumer *inboxkafka.Consumer[pgx.Tx], say func(string, ...any)) error {
	bg := context.WithoutCancel(ctx)
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

	start := time.Now()
	drain := d.watch(ctx, compsCtx, prodsCtx, start)
	stopProd()
	prodErr := prods.Wait()
	if prodErr == nil && compsCtx.Err() == nil {
		say("producer stopped; waiting up to %v for the rest to be published and consumed ...", drain)
		d.waitDrained(compsCtx, d.opts.Out, start, drain)
	}
	stopComps()
	if err := errors.Join(comps.Wait(), prodErr); err != nil {
		return err
	}
	s, err := d.summarize(bg)
	if err != nil {
		return err
	}
	fmt.Fprintln(d.opts.Out, s.String())
	if d.opts.Duration > 0 && ctx.Err() == nil && !s.ok() {
		return fmt.Errorf("dev: inconsistent result: %s", s.String())
	}
	return nil
}

// watch prints a status line every second until o.Duration passes, ctx
// ends (an interrupt), or comps or prods end (a component failed). It
// returns how long to wait for the drain: shorter after an interrupt.
func (d *demo) watch(ctx, comps, prods context.Context, start time.Time) time.Duration {
	var deadline <-chan time.Time
	if d.opts.Duration > 0 {
		t := time.NewTimer(d.opts.Duration)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			d.printStatus(ctx, d.opts.Out, time.Since(start))
		case <-deadline:
			return drainAfterDuration
		case <-ctx.Done():
			return drainAfterInterrupt
		case <-comps.Done(): // the relay or the consumer failed
			return drainAfterDuration
		case <-prods.Done(): // the producer failed
			return drainAfterDuration
		}
	}
}
