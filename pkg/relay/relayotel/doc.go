// Package relayotel traces the relay with OpenTelemetry, by the messaging
// semantic conventions: a relay hook (package relayhook) that records one
// "send {topic}" span per Kafka write.
//
// # Spans
//
// Each Kafka write of the relay (one produce call: a batch, or in
// exactly-once mode a part of a Kafka transaction) is a span of kind
// CLIENT named "send {topic}" ("send" when the write holds records of
// several topics), from the write's start to Kafka's acknowledgement, with:
//
//   - messaging.system "kafka", messaging.operation.type and
//     messaging.operation.name "send", messaging.destination.name;
//   - messaging.batch.message_count, the records written;
//   - messaging.destination.partition.id when they share one partition, and
//     for a single record messaging.kafka.message.key,
//     messaging.kafka.offset and messaging.message.id;
//   - pgoutbox.commit_lsn, the WAL position of the commit of the last
//     record's transaction ("16/B374D848"), and pgoutbox.outbox.lag, the
//     seconds from the oldest record's commit to the write's start;
//   - pgoutbox.kafka.transactional in exactly-once mode;
//   - a link to each record's creation context (its traceparent and
//     tracestate headers, as the outbox writer stored them), carrying the
//     record's messaging.message.id, messaging.destination.partition.id and
//     messaging.kafka.offset;
//   - an error status when the write failed.
//
// A write of a single record is also a child of its creation context, so
// writer, relay and consumer show as one trace (Config.LinkOnly turns that
// off). The relay never changes a record's traceparent: it goes to Kafka
// byte for byte.
//
// # Cost
//
// Without a Tracer in relay.Config.Hooks the relay calls nothing. With one,
// a write whose span is not sampled costs its Start (and, for a single
// record, the parse of its traceparent); the links are built only for a
// recording span.
package relayotel
