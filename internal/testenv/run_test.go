package testenv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// stop cancels run's context, waits for it and returns its error, once; a
// second stop returns the same error without waiting again.
func TestGoStopReturnsRunsError(t *testing.T) {
	t.Parallel()
	errStopped := errors.New("stopped")
	started := make(chan struct{})
	stop := testenv.Go(context.Background(), t, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return errStopped
	})
	<-started
	if err := stop(); !errors.Is(err, errStopped) {
		t.Fatalf("stop: %v, want %v", err, errStopped)
	}
	if err := stop(); !errors.Is(err, errStopped) {
		t.Fatalf("second stop: %v, want %v", err, errStopped)
	}
}
