package stopsignal_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/stopsignal"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The first SIGTERM stops gracefully, a repeated SIGTERM (GNU timeout
// signals the process and then its group) is the same stop, and a Ctrl-C
// after it forces the exit.
func TestNotify(t *testing.T) {
	var out testenv.SyncBuffer
	forced := make(chan struct{})
	ctx, stop := stopsignal.Notify(context.Background(), &out, func() { close(forced) })
	defer stop()
	kill := func(sig syscall.Signal) {
		t.Helper()
		if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	kill(syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("SIGTERM did not cancel the context")
	}
	kill(syscall.SIGTERM)
	testenv.WaitFor(t, time.Minute, "the repeated SIGTERM", func() (bool, error) {
		return strings.Contains(out.String(), "terminated again: still stopping gracefully"), nil
	})
	select {
	case <-forced:
		t.Fatal("a repeated SIGTERM forced the exit")
	default:
	}
	kill(syscall.SIGINT)
	select {
	case <-forced:
	case <-time.After(time.Minute):
		t.Fatalf("Ctrl-C after SIGTERM did not force the exit:\n%s", out.String())
	}
	if !strings.HasPrefix(out.String(), "relay: terminated: stopping gracefully") {
		t.Errorf("first signal not announced:\n%s", out.String())
	}
}
