package relay

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// HeartbeatPrefix is the logical decoding message prefix of the relay's
// heartbeats. The relay publishes only messages whose prefix is exactly
// "pgoutbox", so heartbeats are read, confirmed and never published.
const HeartbeatPrefix = "pgoutbox.heartbeat"

// heartbeat emits a transactional logical decoding message every
// HeartbeatInterval while the relay streams the slot, until ctx ends. The
// message's transaction comes back through the slot, and confirming its end
// LSN advances confirmed_flush_lsn even when nothing else is written.
func (r *Relay) heartbeat(ctx context.Context) {
	(&periodic{
		cfg: &r.cfg, what: "heartbeat", interval: r.cfg.HeartbeatInterval,
		skip: func() bool { return !r.live.Leader.Load() }, // a standby leaves it to the active relay
		job: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `SELECT pg_logical_emit_message(true, $1, '')`, HeartbeatPrefix)
			return err
		},
	}).run(ctx)
}
