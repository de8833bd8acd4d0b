// Package queue is the hand-off from the WAL reader to the sink: slices of
// decoded events, at most BatchSize events and BufferBytes record bytes in
// all.
//
// Decoded events go through the queue to the sink, a transaction at a time
// (queued at its commit, or BatchSize events at a time of a larger one),
// and the sink writes batches of up to BatchSize events (what is queued
// first, then what arrives within BatchTimeout) with one write in flight,
// while the reader goes on decoding the next batch. The producer keeps each
// record batch under its topic's max.message.bytes (see internal/producer
// and docs/kafka.md). The transaction being read, the queue and the batch
// being written hold at most BatchSize events each, and together at most
// BufferBytes record
// bytes (plus the one event waiting for room,
// and the Kafka client's encoded copy of the batch), so large payloads do
// not multiply the relay's memory. While they are full the reader still
// sends status updates, so a slow broker never makes the server drop the
// connection.
//
// The budget is a session's share of a Shared budget: a buffer of its own
// for a lone relay, or one budget for all the sources of a fleet (relay run
// --config --fleet-buffer-bytes), shared out with a floor for each session
// and loans of the rest (see Shared).
package queue
