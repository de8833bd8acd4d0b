package loopcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Shared are the settings every loop's Config has beside its broker's,
// as the loop's New copies them (see inboxkafka.Config for their
// meaning).
type Shared[TTx any] struct {
	Inbox           *inbox.Inbox[TTx]
	Handler         inbox.TxHandler[TTx]
	External        inbox.ExternalHandler
	MetricsInterval time.Duration
	Retention       time.Duration
	PurgeInterval   time.Duration
	OnResult        func(inbox.Message, inbox.Result)
}

// Check validates s for the loop named loop (its package name, in errors),
// fills its defaults (MetricsInterval 30s, PurgeInterval 1h) and returns
// the Inbox's internals.
func (s *Shared[TTx]) Check(loop string) (Internals[TTx], error) {
	switch {
	case s.Inbox == nil:
		return nil, fmt.Errorf("%s: Config.Inbox is required", loop)
	case (s.Handler == nil) == (s.External == nil):
		return nil, fmt.Errorf("%s: set exactly one of Config.Handler and ExternalHandler", loop)
	case s.Retention < 0:
		return nil, fmt.Errorf("%s: Config.Retention %v is negative", loop, s.Retention)
	}
	core, ok := internalsOf(s.Inbox)
	if !ok {
		return nil, fmt.Errorf("%s: Config.Inbox is not an inbox made by inbox.New", loop)
	}
	if s.Retention > 0 && !core.CanPurge() {
		return nil, fmt.Errorf("%s: Config.Retention needs a driver handle that can also run statements (a *pgxpool.Pool or *sql.DB)", loop)
	}
	if s.MetricsInterval == 0 {
		s.MetricsInterval = 30 * time.Second
	}
	if s.PurgeInterval <= 0 {
		s.PurgeInterval = time.Hour
	}
	return core, nil
}

// Start starts the housekeeping on wg until ctx ends, and returns the
// Deliverer of the consumer group that writes dead letters with
// deadLetter to dest.
func (s *Shared[TTx]) Start(ctx context.Context, wg *sync.WaitGroup, core Internals[TTx], log *slog.Logger, group, dest string,
	deadLetter func(context.Context, inbox.KafkaRecord, inbox.Result) error) *Deliverer[TTx] {
	hk := Housekeeping[TTx]{Core: core, In: s.Inbox, Log: log, MetricsInterval: s.MetricsInterval,
		Retention: s.Retention, PurgeInterval: s.PurgeInterval}
	hk.Start(ctx, wg)
	return &Deliverer[TTx]{Core: core, In: s.Inbox, Log: log, Group: group, Handler: s.Handler, External: s.External,
		OnResult: s.OnResult, DeadLetter: deadLetter, DeadLetterDest: dest}
}

// errNoConfig is New's error for a nil config.
var errNoConfig = errors.New("config is nil")

// NilConfig is the error of a loop's New given a nil config.
func NilConfig(loop string) error { return fmt.Errorf("%s: %w", loop, errNoConfig) }
