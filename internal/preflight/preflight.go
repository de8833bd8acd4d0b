package preflight

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

// Check checks that the database answers, that the server and role meet
// the prerequisites (relay.CheckPrerequisites) and, with brokers (the sink
// is Kafka), that at least one broker answers, so a wrong address, credential or server setting fails `relay
// run` at once with one line naming it (and its fix) instead of entering the
// engine's reconnect loop.
func Check(ctx context.Context, cfg *relay.Config, brokers bool) error {
	if err := PingDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	if err := relay.CheckPrerequisites(ctx, cfg); err != nil {
		return err
	}
	if !brokers {
		return nil // the publisher's session reports an unreachable broker, and retries it
	}
	return PingBrokers(ctx, cfg)
}

// PingDatabase connects to the database of url and pings it, within
// preflightTimeout; a failure says "database unreachable" (Unreachable).
func PingDatabase(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return Unreachable(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	return nil
}

// PingBrokers checks that a Kafka broker of cfg answers, within
// preflightTimeout; a failure names the brokers, with a hint when TLS is
// on and the port may be a plaintext listener.
func PingBrokers(ctx context.Context, cfg *relay.Config) error {
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
