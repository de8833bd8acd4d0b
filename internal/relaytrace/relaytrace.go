package relaytrace

import (
	"context"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// Hooks are called from the relay's reader and sink goroutines. Either
// may be nil. They must be quick, as they run on the hot path, and safe
// for concurrent use: the reader and the sink call them at once.
type Hooks struct {
	// Read is called for each event the reader queues: its record, its
	// transaction's commit time (from the WAL, microseconds) and when the
	// WAL message holding it was read from the connection. The record
	// comes by value: a pointer to it would move every event of the
	// reader to the heap, hook set or not.
	Read func(msg publish.Record, commit, read time.Time)
	// Written is called after each Kafka write the sink makes: its
	// records, when the write started and when it returned, and its
	// error.
	Written func(msgs []*publish.Record, start, end time.Time, err error)
}

type hooksKey struct{}

// WithHooks returns a copy of ctx that carries h: a relay run under it
// (or under a context derived from it) calls h's hooks.
func WithHooks(ctx context.Context, h *Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

// FromContext returns the hooks ctx carries, or nil.
func FromContext(ctx context.Context) *Hooks {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	return h
}
