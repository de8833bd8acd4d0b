package loopcore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Housekeeping is the background work of a running loop: the metrics
// refresh every MetricsInterval (none when not positive) and, when
// Retention is positive, the purge of the consumer's COMPLETED rows older
// than it every PurgeInterval (the first at start).
type Housekeeping[TTx any] struct {
	Core            Internals[TTx]
	In              *inbox.Inbox[TTx]
	Log             *slog.Logger
	MetricsInterval time.Duration
	Retention       time.Duration
	PurgeInterval   time.Duration
}

// Start runs the housekeeping on wg until ctx ends.
func (h *Housekeeping[TTx]) Start(ctx context.Context, wg *sync.WaitGroup) {
	if h.MetricsInterval > 0 {
		wg.Go(func() { every(ctx, h.MetricsInterval, h.refresh) })
	}
	if h.Retention > 0 {
		wg.Go(func() { every(ctx, h.PurgeInterval, h.purge) })
	}
}

// refresh calls RefreshMetrics; a failure is logged and the next round
// tries again.
func (h *Housekeeping[TTx]) refresh(ctx context.Context) {
	if err := h.In.RefreshMetrics(ctx); err != nil && ctx.Err() == nil {
		h.Log.Warn("inbox: refresh metrics", "err", err)
	}
}

// purge deletes the consumer's COMPLETED rows older than Retention; a
// failure is logged and the next round tries again.
func (h *Housekeeping[TTx]) purge(ctx context.Context) {
	if _, err := h.Core.Purge(ctx, h.Retention); err != nil && ctx.Err() == nil {
		h.Log.Warn("inbox: purge", "err", err)
	}
}

// every runs f at once and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
