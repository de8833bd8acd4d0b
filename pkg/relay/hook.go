package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// withHooks returns ctx carrying the relay's Config.Hooks and its
// messaging metrics (a HookBatchWritten), sorted by the relayhook
// interfaces each implements, for the stages of a run under it: the reader
// calls the record hooks, the sink the batch, transaction and dead-letter
// ones. Hooks ctx carries already (the relay benchmark's) are kept.
func (r *Relay) withHooks(ctx context.Context) context.Context {
	hooks := append(append([]relayhook.Hook{r.m.Messaging}, r.cfg.Hooks...), hookcall.FromContext(ctx).Hooks()...)
	return hookcall.WithHooks(ctx, hookcall.New(hooks))
}
