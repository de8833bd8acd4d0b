// Package decode turns pgoutput messages into Kafka records: it checks the
// outbox's columns, routes each row to its topic (the topic template,
// TopicTemplate, with a bounded cache of names), builds its key, value and
// headers, and makes a row it cannot publish an invalid event with a
// reason (see Invalid rows in internal/sink). It measures a record's size
// (RecordSize) for every other stage. A large row's copy comes from pools
// the sink gives it back to once the record is written (Recycle).
//
// Logical decoding messages with prefix "pgoutbox" (written by
// outbox.Writer.EmitTx inside a transaction) are published exactly like
// rows, in commit order with them; other prefixes, and non-transactional
// messages (EmitTx never writes those), are ignored.
//
// Each record is: topic from the row's topic column, else TopicTemplate
// (default "outbox.{aggregate_type}"); key aggregate_id, partitioned with
// murmur2 like the Java client; value the payload bytes; headers
// message-id, business-key, event-type, aggregate-type, aggregate-id, then
// the row's headers object (which cannot override those); timestamp the
// transaction's commit time. Writes use acks=all.
package decode
