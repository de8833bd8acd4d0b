package relay

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/hookcall"
)

// withHooks returns ctx carrying the relay's Config.Hooks, sorted by the
// relayhook interfaces each implements, for the stages of a run under it:
// the reader calls the record hooks, the sink the batch, transaction and
// dead-letter ones. Without hooks it is ctx, and the stages make no call.
func (r *Relay) withHooks(ctx context.Context) context.Context {
	return hookcall.WithHooks(ctx, hookcall.New(r.cfg.Hooks))
}
