package relay

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
)

// pollSlot reads the slot every LagPollInterval on a regular connection
// and updates the slot gauges, until ctx ends. It runs whether the relay
// streams or waits as a standby.
func (r *Relay) pollSlot(ctx context.Context) {
	(&periodic{
		cfg: &r.cfg, what: "reading the slot's lag", interval: r.cfg.LagPollInterval, now: true,
		job: func(ctx context.Context, conn *pgx.Conn) error {
			row, err := slotstate.ReadSlot(ctx, conn, r.cfg.Slot)
			if err == nil {
				r.m.Slot.Set(relaymetrics.SlotReading{Exists: row.Exists, Active: row.Active, Lag: row.Lag, Retained: row.Retained,
					SafeWALSize: row.SafeWALSize, WALStatus: slotstate.Deref(row.WALStatus), StandbyWait: len(row.StandbyWait)})
			}
			return err
		},
	}).run(ctx)
}
