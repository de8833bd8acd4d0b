package relaycli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// preflightTimeout bounds each start-up check.
const preflightTimeout = 15 * time.Second

// preflight checks that the database answers, that the server and role meet
// the prerequisites (relay.CheckPrerequisites) and that at least one broker
// answers, so a wrong address, credential or server setting fails `relay
// run` at once with one line naming it (and its fix) instead of entering the
// engine's reconnect loop.
func preflight(ctx context.Context, cfg *relay.Config) error {
	if err := pingDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	if err := relay.CheckPrerequisites(ctx, cfg); err != nil {
		return err
	}
	if cfg.Sink != "" && cfg.Sink != sinkKafka {
		return nil // the publisher's session reports an unreachable broker, and retries it
	}
	return pingBrokers(ctx, cfg)
}

func pingDatabase(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return unreachable(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	return nil
}

func pingBrokers(ctx context.Context, cfg *relay.Config) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	err := relay.PingBrokers(ctx, cfg)
	if err != nil {
		return fmt.Errorf("kafka unreachable (%s): %w%s", strings.Join(cfg.Kafka.Brokers, ","), err, tlsHint(cfg, err))
	}
	return nil
}

// tlsHint says, when TLS is on and the brokers never completed a
// handshake (a timeout, a closed or reset connection, an answer that is
// not TLS), that the port may be a plaintext listener: the error alone
// said only "context deadline exceeded".
func tlsHint(cfg *relay.Config, err error) string {
	var rec tls.RecordHeaderError
	if cfg.Kafka.TLS == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.As(err, &rec)) {
		return ""
	}
	return " (TLS is on, --kafka-tls: a broker port without TLS never completes the handshake; check that the port is the brokers' TLS listener, or turn --kafka-tls off for a plaintext one)"
}
