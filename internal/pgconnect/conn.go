package pgconnect

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Connect opens a normal (non-replication) connection to databaseURL.
func Connect(ctx context.Context, databaseURL string) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, relayerr.Permanent(fmt.Errorf("%w: database URL: %w", relaytype.ErrConfig, redact.ParseError(databaseURL, err)))
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("relay: connect to database: %w", err)
	}
	return conn, nil
}

// ConnectReplication opens a logical replication connection
// (replication=database).
func ConnectReplication(ctx context.Context, databaseURL string) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return nil, relayerr.Permanent(fmt.Errorf("%w: database URL: %w", relaytype.ErrConfig, redact.ParseError(databaseURL, err)))
	}
	pc.RuntimeParams["replication"] = "database"
	// Keepalives and TCP_USER_TIMEOUT notice a dead peer in seconds,
	// not after the kernel's ~15 minutes of retransmission; the session
	// narrows TCP_USER_TIMEOUT to its liveness bound once it read
	// wal_sender_timeout.
	dialer := &net.Dialer{
		Timeout:         pc.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3},
		Control:         dialControl(DefaultLivenessBound),
	}
	pc.DialFunc = dialer.DialContext
	if pc.RuntimeParams["application_name"] == "" {
		// Names the relay in pg_stat_replication (and relay status).
		pc.RuntimeParams["application_name"] = "pgoutbox-relay"
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("relay: open replication connection: %w", err)
	}
	return conn, nil
}
