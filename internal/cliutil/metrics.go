package cliutil

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsServer serves /metrics, /healthz and /readyz (relay run, relay
// dev).
type MetricsServer struct {
	srv *http.Server
	// Addr is the address it listens on (the port chosen when the one
	// asked for was 0).
	Addr string
	done chan struct{}
}

// Role is what the readiness endpoints ask the relay (*relay.Relay
// implements it).
type Role interface {
	// Ready reports whether the relay streams the slot.
	Ready() bool
	// Standby reports whether it waits while another process streams it.
	Standby() bool
}

// serverTimeouts bound how long a client may hold one of the metrics
// server's connections, so that idle or slow clients cannot pile up.
type serverTimeouts struct {
	// readHeader, read and write bound reading a request's headers,
	// reading the whole request and writing its response.
	readHeader, read, write time.Duration
	// idle closes a keep-alive connection with no new request.
	idle time.Duration
}

// metricsTimeouts are the metrics server's timeouts: a scrape or a probe
// is a small GET answered at once; Prometheus' default scrape timeout is
// 10s and its interval 15s or more, so an idle connection outliving 60s
// would be reopened anyway.
var metricsTimeouts = serverTimeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 60 * time.Second}

// ServeMetrics listens on addr and serves reg in the background until
// Close. /healthz answers 200 while the process runs; /readyz answers 200
// while role.Ready() and 503 otherwise (a standby is not ready);
// /readyz?standby=ok also answers 200 while role.Standby(), for a
// Kubernetes readiness probe over a leader and its standbys: there a
// standby that is never ready would stall every rollout and block every
// node drain under a PodDisruptionBudget. A connection is closed after 60s
// without a request, and a request must arrive within 10s (headers within
// 5s).
func ServeMetrics(addr string, reg *prometheus.Registry, role Role, logger *slog.Logger) (*MetricsServer, error) {
	return serveMetrics(addr, reg, role, logger, metricsTimeouts)
}

func serveMetrics(addr string, reg *prometheus.Registry, role Role, logger *slog.Logger, to serverTimeouts) (*MetricsServer, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", Healthz)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case role.Ready():
			_, _ = w.Write([]byte("ready\n"))
		case r.URL.Query().Get("standby") == "ok" && role.Standby():
			_, _ = w.Write([]byte("standby\n"))
		default:
			http.Error(w, "not ready: not streaming", http.StatusServiceUnavailable)
		}
	})
	return serve(addr, mux, "/metrics /healthz /readyz", logger, to)
}

// Healthz answers 200 "ok": the process runs.
func Healthz(w http.ResponseWriter, _ *http.Request) {
	_, _ = w.Write([]byte("ok\n"))
}

// Serve listens on addr and serves h in the background until Close, with
// the metrics server's timeouts; paths names what it serves, for the log.
func Serve(addr string, h http.Handler, paths string, logger *slog.Logger) (*MetricsServer, error) {
	return serve(addr, h, paths, logger, metricsTimeouts)
}

func serve(addr string, h http.Handler, paths string, logger *slog.Logger, to serverTimeouts) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &MetricsServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: to.readHeader,
			ReadTimeout:       to.read,
			WriteTimeout:      to.write,
			IdleTimeout:       to.idle,
		},
		Addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", slog.Any("error", err))
		}
	}()
	logger.Info("serving metrics", slog.String("addr", m.Addr), slog.String("paths", paths))
	return m, nil
}

// Close shuts the server down, waiting briefly for requests in progress.
func (m *MetricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}
