package testenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Go runs run (the Run method of a relay or a consumer) in a goroutine with
// a context derived from ctx, and owns it: stop cancels that context and
// returns what run returned. A test that never calls stop has it called at
// cleanup, failing t unless run returned nil.
func Go(ctx context.Context, t testing.TB, run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	wait := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	var called atomic.Bool
	t.Cleanup(func() {
		if !called.Load() {
			if err := wait(); err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
	return func() error {
		called.Store(true)
		return wait()
	}
}
