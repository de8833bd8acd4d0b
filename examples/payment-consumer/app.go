package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// config is the parsed command line.
type config struct {
	databaseURL    string
	brokers        []string
	topic          string
	group          string
	apiURL         string // empty: start the fake API in-process
	apiListen      string
	apiFailEvery   int
	strategy       string
	apiTimeout     time.Duration
	reservationTTL time.Duration
	sessionTimeout time.Duration
	metricsAddr    string
	retryBackoff   time.Duration
	leaseDuration  time.Duration
}

// run is the whole program. It returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("payment-consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres URL of the consumer's database, holding the inbox table (env DATABASE_URL)")
	brokers := fs.String("brokers", envOr("KAFKA_BROKERS", "localhost:9092"), "Kafka bootstrap brokers, comma separated (env KAFKA_BROKERS)")
	fs.StringVar(&cfg.topic, "topic", "outbox.order", "topic of the order.placed events")
	fs.StringVar(&cfg.group, "group", "payments", "Kafka consumer group, also the inbox consumer name")
	fs.StringVar(&cfg.apiURL, "payment-api-url", os.Getenv("PAYMENT_API_URL"), "payment API base URL; empty starts the fake one in-process (env PAYMENT_API_URL)")
	fs.StringVar(&cfg.apiListen, "payment-api-listen", envOr("PAYMENT_API_LISTEN", "127.0.0.1:8081"), "address of the in-process fake payment API (env PAYMENT_API_LISTEN)")
	fs.StringVar(&cfg.strategy, "strategy", envOr("PAYMENT_STRATEGY", strategyIdempotencyKey), "how a retry avoids a second charge: "+strategyIdempotencyKey+", "+strategyQueryStatus+" or "+strategyReserveConfirm+" (see below; env PAYMENT_STRATEGY)")
	fs.IntVar(&cfg.apiFailEvery, "payment-api-fail-every", 0, "the fake API loses the response of every n-th new charge (after charging), to show that a retry charges nothing twice; 0 never")
	fs.DurationVar(&cfg.apiTimeout, "payment-api-timeout", 5*time.Second, "timeout of each payment API request; "+strategyQueryStatus+" also sends it as the charge's deadline, and waits for it to pass before a not-found status is final. Must be below --lease")
	fs.DurationVar(&cfg.reservationTTL, "payment-api-reservation-ttl", time.Minute, "the fake API ("+strategyReserveConfirm+") voids a reservation not confirmed within this time")
	fs.DurationVar(&cfg.sessionTimeout, "session-timeout", 30*time.Second, "Kafka group session and rebalance timeout: how long before a dead consumer's partitions move to another one")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", envOr("METRICS_ADDR", ":9741"), "serve /metrics and /healthz here; empty disables (env METRICS_ADDR)")
	fs.DurationVar(&cfg.retryBackoff, "retry-backoff", time.Second, "wait before the first retry of a failed charge; doubles per attempt up to 1m")
	fs.DurationVar(&cfg.leaseDuration, "lease", 30*time.Second, "how long a charge in progress is leased before another delivery may take it over")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: payment-consumer [flags]\n\nConsumes order.placed events through the inbox and charges each order once at a payment API.\n\n")
		fs.PrintDefaults()
		fmt.Fprint(stderr, strategyHelp)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.brokers = append(cfg.brokers, b)
		}
	}
	if cfg.databaseURL == "" || len(cfg.brokers) == 0 {
		fmt.Fprintln(stderr, "payment-consumer: --database-url (or DATABASE_URL) and --brokers are required")
		return 2
	}
	switch {
	case cfg.strategy != strategyIdempotencyKey && cfg.strategy != strategyQueryStatus && cfg.strategy != strategyReserveConfirm:
		fmt.Fprintf(stderr, "payment-consumer: unknown --strategy %q\n", cfg.strategy)
		return 2
	case cfg.apiTimeout <= 0 || cfg.apiTimeout >= cfg.leaseDuration:
		// The handler's context ends with the lease: a request must fit
		// in it.
		fmt.Fprintf(stderr, "payment-consumer: --payment-api-timeout %v must be positive and below --lease %v\n", cfg.apiTimeout, cfg.leaseDuration)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := consume(ctx, cfg, stdout, log); err != nil {
		fmt.Fprintf(stderr, "payment-consumer: %v\n", err)
		return 1
	}
	return 0
}

// consume runs the consumer (and the fake API, the metrics server) until
// ctx ends.
func consume(ctx context.Context, cfg config, stdout io.Writer, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		return err
	}
	var srv servers
	defer srv.shutdown(ctx)

	apiURL := cfg.apiURL
	if apiURL == "" {
		if apiURL, err = startFakeAPI(&srv, cfg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "payment-consumer: fake payment API on %s (GET /v1/charges lists the charges)\n", apiURL)
	}
	reg := prometheus.NewRegistry()
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{
		Consumer:      cfg.group,
		LeaseDuration: cfg.leaseDuration,
		Backoff: func(attempt int) time.Duration {
			return min(cfg.retryBackoff<<min(attempt-1, 16), time.Minute)
		},
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return err
	}
	if cfg.metricsAddr != "" {
		addr, err := srv.serve(cfg.metricsAddr, metricsMux(reg))
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		fmt.Fprintf(stdout, "payment-consumer: metrics on http://%s/metrics\n", addr)
	}
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:          cfg.brokers,
		GroupID:          cfg.group,
		Topics:           []string{cfg.topic},
		Inbox:            in,
		ExternalHandler:  strategyHandler(newPaymentClient(apiURL, cfg.apiTimeout), cfg.strategy),
		SessionTimeout:   cfg.sessionTimeout,
		RebalanceTimeout: cfg.sessionTimeout,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			log.Info("order.placed handled", "business_key", msg.BusinessKey, "outcome", res.Outcome.String(),
				"attempts", res.Attempts, "reconciled", res.Reconciled, "charge", res.ResultRef)
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "payment-consumer: consuming %s from %s as group %s, strategy %s\n", cfg.topic, strings.Join(cfg.brokers, ","), cfg.group, cfg.strategy)
	return c.Run(ctx)
}

// strategyHandler is the charge of strategy.
func strategyHandler(client *paymentClient, strategy string) inbox.ExternalHandler {
	switch strategy {
	case strategyQueryStatus:
		return client.chargeQueryStatus
	case strategyReserveConfirm:
		return client.chargeReserveConfirm
	}
	return client.charge
}

// startFakeAPI serves the fake payment API that matches cfg.strategy on
// cfg.apiListen and returns its base URL.
func startFakeAPI(srv *servers, cfg config) (string, error) {
	api := newPaymentAPI(cfg.apiFailEvery).routes()
	if cfg.strategy != strategyIdempotencyKey {
		api = newNoKeyAPI(cfg.apiFailEvery, cfg.reservationTTL).routes()
	}
	addr, err := srv.serve(cfg.apiListen, api)
	if err != nil {
		return "", fmt.Errorf("fake payment API: %w", err)
	}
	return "http://" + addr, nil
}

// metricsMux serves reg on /metrics and ok on /healthz.
func metricsMux(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

// servers are the HTTP servers of the program, shut down together.
type servers struct {
	list []*http.Server
	wg   sync.WaitGroup
}

// serve serves h on addr in the background and returns the address it
// listens on.
func (s *servers) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	// Timeouts so that idle or slow clients cannot hold connections open.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	s.list = append(s.list, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), nil
}

// shutdown stops every server, waiting up to 5s for requests in flight.
func (s *servers) shutdown(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, srv := range s.list {
		_ = srv.Shutdown(sctx)
	}
	s.wg.Wait()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
