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
// (franz-go's) produce requests and connection buffers. Without it the heap grows to about twice its live size between
// two collections, which with large records is most of the process's
// memory.
func memoryLimit(bufferBytes int) int64 {
	return int64(bufferBytes)*3/2 + 32<<20
}

// setMemoryLimit applies memoryLimit unless GOMEMLIMIT is set.
func setMemoryLimit(bufferBytes int, logger *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	limit := memoryLimit(bufferBytes)
	debug.SetMemoryLimit(limit)
	logger.Debug("soft memory limit set from --buffer-bytes (GOMEMLIMIT overrides)", "limit_bytes", limit)
}
