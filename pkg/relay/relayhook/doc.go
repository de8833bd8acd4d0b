// Package relayhook declares the relay's public hook: interfaces a user
// implements to see each stage of the relay's data path, in the style of
// franz-go's kgo.Hook and pgx's tracers.
//
// # Hooks
//
// A hook is any value: the relay asks each value of relay.Config.Hooks,
// once when it is built, which of the interfaces below it implements
// (a type assertion), and calls only those. Implement any subset:
//
//   - [HookRecordBuilt]: the reader built a Kafka record from an outbox row
//     or message (its commit time and LSN, and when its WAL message was read);
//   - [HookBatchRead]: the sink took a batch of events off the queue;
//   - [HookBatchWritten]: a Kafka write returned, with each record's
//     partition and offset;
//   - [HookTxnCommitted]: an exactly-once Kafka transaction was committed
//     (or its commit failed);
//   - [HookDeadLettered]: a row's dead-letter record was written.
//
// The relay's OpenTelemetry tracer (package relayotel) and the relay
// benchmark's timing are built on these.
//
// # Cost
//
// A hook costs nothing where it is not set: without a HookRecordBuilt the
// reader makes no call per event (one nil check), and the sink's calls
// build no view and allocate nothing per record (the relay's own
// messaging metrics are such a hook, one call per write). A hook runs on the relay's hot path, on the reader's goroutine
// (HookRecordBuilt) or the sink's (the others), at once: it must be quick
// and safe for concurrent use. The values it gets (a [Record], the slices of
// [BatchWritten]) are valid only during the call; copy what you keep.
package relayhook
