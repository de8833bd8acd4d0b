package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// SlotStatus describes the relay's slot and publication as the database
// sees them; it can be read while no relay runs (relaytype.SlotStatus
// documents its fields and JSON names).
type SlotStatus = relaytype.SlotStatus

// StateStatus is the slot's row of the relay state table
// (relaytype.StateStatus).
type StateStatus = relaytype.StateStatus

// GapStatus is a gap as relay status shows it (relaytype.GapStatus).
type GapStatus = relaytype.GapStatus

// ProgressStatus is the exactly-once progress of a slot as Kafka holds it
// (relaytype.ProgressStatus).
type ProgressStatus = relaytype.ProgressStatus

// Status reads the slot and publication state from the database and, with
// cfg.ExactlyOnce, the progress committed to Kafka (from cfg.Kafka.Brokers
// and cfg.Kafka.ProgressTopic).
func Status(ctx context.Context, cfg *Config) (*SlotStatus, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return nil, err
	}
	return admin.Status(ctx, &ac)
}
