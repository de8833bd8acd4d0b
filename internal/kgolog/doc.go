// Package kgolog passes a franz-go client's warnings and errors to slog:
// the one kgo.Logger of the module's Kafka clients (the relay's producer
// and readers, the inbox's consumer and dead-letter writer). It is a leaf,
// so the inbox links nothing of the relay to log.
package kgolog
