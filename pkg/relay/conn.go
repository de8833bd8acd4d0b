package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// connect opens a normal (non-replication) connection.
func connect(ctx context.Context, c *Config) (*pgx.Conn, error) {
	pc, err := pgx.ParseConfig(c.DatabaseURL)
	if err != nil {
		return nil, permanent(fmt.Errorf("%w: database URL: %w", ErrConfig, err))
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("relay: connect to database: %w", err)
	}
	return conn, nil
}

// connectReplication opens a logical replication connection
// (replication=database).
func connectReplication(ctx context.Context, c *Config) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(c.DatabaseURL)
	if err != nil {
		return nil, permanent(fmt.Errorf("%w: database URL: %w", ErrConfig, err))
	}
	pc.RuntimeParams["replication"] = "database"
	// Keepalives and TCP_USER_TIMEOUT notice a dead peer in seconds,
	// not after the kernel's ~15 minutes of retransmission; the session
	// narrows TCP_USER_TIMEOUT to its liveness bound once it read
	// wal_sender_timeout.
	dialer := &net.Dialer{
		Timeout:         pc.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3},
		Control:         dialControl(defaultLivenessBound),
	}
	pc.DialFunc = dialer.DialContext
	pc.BuildFrontend = replicationFrontend
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

// replicationReadBuffer is how much the replication connection reads from
// its socket at once. pgproto3 reads 8 KiB at a time; while the relay
// drains a backlog the walsender keeps the socket full, and one read of up
// to this size takes what would be many.
const replicationReadBuffer = 128 << 10

// replicationFrontend is pgproto3's frontend over a larger read buffer. A
// read deadline's timeout still reaches the caller (bufio returns the
// underlying reader's error), so the stream's deadline reads work as
// before.
func replicationFrontend(r io.Reader, w io.Writer) *pgproto3.Frontend {
	return pgproto3.NewFrontend(bufio.NewReaderSize(r, replicationReadBuffer), w)
}
