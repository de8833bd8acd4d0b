package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/admin"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Status reads the slot and publication state from the database and, with
// cfg.ExactlyOnce, the progress committed to Kafka (from cfg.Kafka.Brokers
// and cfg.Kafka.ProgressTopic).
func Status(ctx context.Context, cfg *Config) (*relaytype.SlotStatus, error) {
	ac, err := adminConfig(cfg)
	if err != nil {
		return nil, err
	}
	return admin.Status(ctx, &ac)
}
