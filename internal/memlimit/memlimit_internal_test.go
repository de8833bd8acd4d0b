package memlimit

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
)

// The soft memory limits: 1.25 × the buffer + 16 MiB for a lone relay (36
// MiB at the default 16 MiB), plus 2 MiB a source for a fleet's budget.
func TestMemoryLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"relay run default", ForBuffer(16 << 20), 36 << 20},
		{"relay run 64 MiB", ForBuffer(64 << 20), 96 << 20},
		{"fleet of 1", ForFleet(16<<20, 1), 38 << 20},
		{"fleet of 50, 64 MiB", ForFleet(64<<20, 50), 196 << 20},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d MiB, want %d MiB", tc.name, tc.got>>20, tc.want>>20)
		}
	}
}

// A fleet's limit follows its reloads while it is the one the process set;
// GOMEMLIMIT, or a limit set by someone else, is left alone. Not parallel:
// the limit is the process's.
func TestUpdateMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	log := slog.New(slog.DiscardHandler)

	first := Update(0, 100<<20, "test", log)
	if first != 100<<20 || debug.SetMemoryLimit(-1) != 100<<20 {
		t.Fatalf("first: owned %d, runtime %d, want 100 MiB", first, debug.SetMemoryLimit(-1))
	}
	if got := Update(first, 200<<20, "test", log); got != 200<<20 || debug.SetMemoryLimit(-1) != 200<<20 {
		t.Fatalf("reload: owned %d, runtime %d, want 200 MiB", got, debug.SetMemoryLimit(-1))
	}
	if got := Update(0, 300<<20, "test", log); got != 0 || debug.SetMemoryLimit(-1) != 200<<20 {
		t.Fatalf("a second first call took the limit over: owned %d, runtime %d", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(50 << 20) // someone else's
	if got := Update(200<<20, 300<<20, "test", log); got != 0 || debug.SetMemoryLimit(-1) != 50<<20 {
		t.Fatalf("another's limit replaced: owned %d, runtime %d", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "1GiB")
	if got := Update(0, 100<<20, "test", log); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT overridden: owned %d, runtime %d", got, debug.SetMemoryLimit(-1))
	}
}
