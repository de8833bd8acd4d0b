package memlimit

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
)

// ForBuffer is the soft memory limit `relay run` gives the Go runtime
// for a buffer of bufferBytes: the buffer (the records queued or being
// written) and a quarter as much again for the garbage of those already
// written, plus 16 MiB for the runtime, the decoder and the Kafka client's
// (franz-go's) produce request, about one record batch, and connection
// buffers (a heap of ~31 MB at most in a drain of 100 KB rows at the
// default 16 MiB; docs/benchmarks.md has the figures). Without it the heap grows to about twice its live size between
// two collections, which with large records is most of the process's
// memory.
func ForBuffer(bufferBytes int) int64 {
	return int64(bufferBytes)*5/4 + 16<<20
}

// ForVerify is the soft memory limit `relay verify` gives the Go
// runtime for sorts of at most maxInMemory entries: 512 bytes an entry
// (two sorts, rows and records, of ~100-byte entries and the prefixes of
// their keys, and their garbage) plus 64 MiB for the runtime, the rows and
// fetches in flight. Entries are of fixed size whatever the keys hold
// (unless --full-keys), so without a limit most of verify's peak is
// garbage of large rows and records the collector has not reached yet.
func ForVerify(maxInMemory int) int64 {
	return int64(maxInMemory)*512 + 64<<20
}

// perSource is what a fleet's source adds to the process beside its
// share of the buffer: its replication and Kafka connections, goroutines,
// decoder and metrics (a source adds about 0.5 MiB of RSS idle, 0.8 MiB
// under load; see docs/fleet.md), with room for the garbage of a busy one.
const perSource = 2 << 20

// ForFleet is the soft memory limit of `relay run --config` for a
// shared buffer of budget bytes and that many sources: a lone relay's
// limit for the budget, plus perSource a source, so that the limit
// never falls under what idle sources hold (the collector would then run
// without pause).
func ForFleet(budget int64, sources int) int64 {
	return ForBuffer(int(budget)) + int64(sources)*perSource
}

// Set applies limit as the runtime's soft memory limit unless
// GOMEMLIMIT (or an earlier call) set one; from names what it was derived
// from, for the debug log.
func Set(limit int64, from string, logger *slog.Logger) {
	Update(0, limit, from, logger)
}

// Update applies limit as the runtime's soft memory limit if
// the runtime's is still prev, the one set by the caller before (0: none,
// as Set), and not GOMEMLIMIT's. It returns the limit the
// caller now owns: limit, or 0 when GOMEMLIMIT or another caller set it.
func Update(prev, limit int64, from string, logger *slog.Logger) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	if cur := debug.SetMemoryLimit(-1); prev == 0 && cur != math.MaxInt64 || prev != 0 && cur != prev {
		return 0
	}
	debug.SetMemoryLimit(limit)
	logger.Debug("soft memory limit set from "+from+" (GOMEMLIMIT overrides)", "limit_bytes", limit)
	return limit
}
