// Package inboxkafkago adapts segmentio/kafka-go to the inbox, for services
// that already run kafka-go readers of their own: Record turns each
// kafka.Message into the inbox's record type, which Inbox.Process (or
// ProcessTx, ProcessExternal) and DeadLetterWriter.Settle take. Commit the
// message's offset only when Settle says so.
//
// The inbox's own consumer loop (inboxkafka.New) runs on franz-go and
// reads read_committed; kafka-go's Reader reads every record of a Kafka
// transaction, aborted ones too, and hands the transaction markers out as
// records (segmentio/kafka-go#1332). Record reports a marker (ok false):
// skip it and commit its offset. The records of an aborted transaction (an
// exactly-once relay that was fenced) are handled, then deduplicated when
// the relay writes them again under the same message IDs; with an
// exactly-once relay prefer the inbox's own loop, which never sees them.
//
// # Example
//
// See the package example: a kafka-go reader loop with Process, Settle and
// CommitMessages.
package inboxkafkago
