package relaycli

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
)

// memoryLimit is the soft memory limit `relay run` gives the Go runtime
// for a buffer of bufferBytes: the buffer (the records queued or being
// written) and half as much again for the garbage of those already
// written, plus 32 MiB for the runtime, the decoder and the Kafka client's
// (franz-go's) produce requests and connection buffers. Without it the
// heap grows to about twice its live size between two collections, which
// with large records is most of the process's memory.
func memoryLimit(bufferBytes int) int64 {
	return int64(bufferBytes)*3/2 + 32<<20
}

// verifyMemoryLimit is the soft memory limit `relay verify` gives the Go
// runtime for sorts of at most maxInMemory entries: 512 bytes an entry
// (two sorts, rows and records, of ~100-byte entries and the prefixes of
// their keys, and their garbage) plus 64 MiB for the runtime, the rows and
// fetches in flight. Entries are of fixed size whatever the keys hold
// (unless --full-keys), so without a limit most of verify's peak is
// garbage of large rows and records the collector has not reached yet.
func verifyMemoryLimit(maxInMemory int) int64 {
	return int64(maxInMemory)*512 + 64<<20
}

// setMemoryLimit applies limit as the runtime's soft memory limit unless
// GOMEMLIMIT (or an earlier call) set one; from names what it was derived
// from, for the debug log.
func setMemoryLimit(limit int64, from string, logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	debug.SetMemoryLimit(limit)
	logger.Debug("soft memory limit set from "+from+" (GOMEMLIMIT overrides)", "limit_bytes", limit)
}
