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
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// run is the whole program: flags, tables, HTTP server, optional order
// generator. It returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
	listen := fs.String("listen", envOr("LISTEN_ADDR", ":8080"), "HTTP address of POST /orders and GET /healthz (env LISTEN_ADDR)")
	every := fs.Duration("every", envDuration("ORDER_EVERY", 0), "also place a random order at this interval, e.g. 1s; 0 disables (env ORDER_EVERY)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: producer [flags]\n\nAn example service: POST /orders writes an order and its outbox row in one transaction.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dbURL == "" {
		fmt.Fprintln(stderr, "producer: --database-url (or DATABASE_URL) is required")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := serve(ctx, *dbURL, *listen, *every, stdout, log); err != nil {
		fmt.Fprintf(stderr, "producer: %v\n", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, dbURL, listen string, every time.Duration, stdout io.Writer, log *slog.Logger) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	svc, err := newService(pool)
	if err != nil {
		return err
	}
	if err := svc.migrate(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// Timeouts so that idle or slow clients cannot hold connections open.
	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "producer: listening on %s (POST /orders)\n", ln.Addr())

	var wg sync.WaitGroup
	defer wg.Wait()
	genCtx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	if every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc.generate(genCtx, every, log)
		}()
	}
	select {
	case err = <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	return err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
