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

// Loop is what a loop keeps beside its broker's settings: the shared
// settings, checked, the Inbox's internals and the loop's logger.
type Loop[TTx any] struct {
	Shared[TTx]
	Core Internals[TTx]
	Log  *slog.Logger
}

// NewLoop checks s for the loop named loop (Shared.Check) and returns the
// Loop, logging with attrs.
func NewLoop[TTx any](loop string, s Shared[TTx], attrs ...any) (Loop[TTx], error) {
	core, err := s.Check(loop)
	if err != nil {
		return Loop[TTx]{}, err
	}
	return Loop[TTx]{Shared: s, Core: core, Log: core.Log().With(attrs...)}, nil
}

// Start starts the housekeeping on wg until ctx ends, and returns the
// Deliverer of the consumer group that writes dead letters with
// deadLetter to dest.
func (l *Loop[TTx]) Start(ctx context.Context, wg *sync.WaitGroup, group, dest string,
	deadLetter func(context.Context, inbox.KafkaRecord, inbox.Result) error) *Deliverer[TTx] {
	hk := Housekeeping[TTx]{Core: l.Core, In: l.Inbox, Log: l.Log, MetricsInterval: l.MetricsInterval,
		Retention: l.Retention, PurgeInterval: l.PurgeInterval}
	hk.Start(ctx, wg)
	return &Deliverer[TTx]{Core: l.Core, In: l.Inbox, Log: l.Log, Group: group, Handler: l.Handler, External: l.External,
		OnResult: l.OnResult, DeadLetter: deadLetter, DeadLetterDest: dest}
}

// errNoConfig is New's error for a nil config.
var errNoConfig = errors.New("config is nil")

// NilConfig is the error of a loop's New given a nil config.
func NilConfig(loop string) error { return fmt.Errorf("%s: %w", loop, errNoConfig) }
