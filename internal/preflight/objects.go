package preflight

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// Objects says which of the relay's database objects exist.
type Objects struct {
	Table, Publication, Slot bool
}

// ReadObjects looks up the table, publication and slot of cfg, so setup and
// teardown can say what they created, found or dropped.
func ReadObjects(ctx context.Context, cfg *relay.Config) (Objects, error) {
	table, err := pgname.Parse(cfg.Table, "public")
	if err != nil {
		return Objects{}, err
	}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return Objects{}, Unreachable(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var o Objects
	err = conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $2),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $3)`,
		table.Sanitize(), cfg.Publication, cfg.Slot).Scan(&o.Table, &o.Publication, &o.Slot)
	if err != nil {
		return Objects{}, fmt.Errorf("read slot and publication: %w", err)
	}
	return o, nil
}
