package slotstate

import (
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Config is what the slot, publication and state code takes of
// relay.Config (whose fields document each); package relay derives it.
type Config struct {
	// DatabaseURL is where the slot lives.
	DatabaseURL string
	// Slot and Publication are the replication slot and its publication.
	Slot        string
	Publication string
	// Table and TableFormat are the outbox table and its layout.
	Table       string
	TableFormat relaytype.TableFormat
	// NoCreate stops the creation of a missing slot, publication or
	// state table.
	NoCreate bool
	// PruneAfter, when positive, means rows are pruned (the catalog
	// checks read it).
	PruneAfter time.Duration
	// Logger receives the warnings.
	Logger *slog.Logger
}
