// Package verify audits the outbox against Kafka: every outbox row created
// in a time window must be in its topic. It is `relay verify` and
// relay.Verify.
//
// # What it reads
//
// The rows of the window: the outbox rows with created_at in [From, To)
// (Debezium's table: timestamp; its message ID serves as business key),
// read in one statement, routed to their topic by the relay's own routing
// (Config.Route: the topic column, else the topic template).
//
// The records: every routed topic, and the dead-letter topic, from the
// first offset whose timestamp is at or after From minus Margin
// (ListOffsets by time; the relay stamps a record with its transaction's
// commit time, which is never before the row's created_at) up to each
// partition's high watermark when the read starts, keeping what a
// read_committed reader sees (each transaction's records judged by its
// marker, so a transaction left open does not hide the records after it),
// through the sink's read side (Config.Reader, a publish.Reader: Kafka's is
// internal/publish/kafkapub's ScanTopics). Later records are not read: a row the relay publishes meanwhile is
// pending when it is newer than Grace, missing otherwise.
//
// # How it matches
//
// By message ID (the message-id header against the id column). Rows and
// records are each sorted by ID and walked together. A row is found when a
// record of its ID is in its topic, dead-lettered when only the
// dead-letter topic has it, missing when none has. Every record of a row
// after the first is a duplicate. A record whose key is not the row's
// aggregate_id, whose business-key header is not its business_key, or
// that sits in another topic is a mismatch. The first delivery of each row
// (lowest offset in its topic) is then sorted by topic, partition,
// aggregate and offset: a commit time (record timestamp, millisecond
// precision) earlier than one delivered before it in the same aggregate is
// an order break.
//
// # Bounded memory
//
// Three external sorts (rows, records, first deliveries) each keep at most
// MaxInMemory entries in memory; above that they sort the entries and
// write them as a run to a file in SpillDir, and the runs are merged at the
// end (at most 64 at once; more are merged into one first). An entry is
// the ID, topic, partition, offset, timestamp, key and business key: about
// 100 bytes plus the keys. So a window of any size needs about 3 ×
// MaxInMemory entries of memory, plus a 64 KiB buffer per run while
// merging, and about its size in entries on disk.
//
// Records of no row are not stored: the rows are read first, and their
// message IDs fill a Bloom filter (about 1.8 bytes a row at a 0.1%
// false-positive rate, at most 32 MiB); a record whose ID the filter does
// not hold is counted as unmatched (and unverifiable, in the pruned
// range) as it is read, and dropped before its keys are kept. The few
// other IDs the filter lets through are stored and counted by the merge,
// as before. So the records sort holds the records of the window's rows
// only, however many others the topics hold.
//
// # What it cannot tell
//
//   - A row deleted from the table. Pruning deletes published rows; the
//     relay's state row records how far (pruned_before). Rows of the window
//     created before that mark may be gone: verify reports the mark, and
//     the records of that range that match no row left as unverifiable, but
//     it cannot tell a pruned row from one never written, nor count the rows
//     that were there. A DELETE by anyone else leaves no mark at all.
//   - Events written as logical messages (outbox.Writer.EmitTx): they are in
//     no table. Their records count as unmatched.
//   - A record deleted from Kafka (retention, DeleteRecords) is missing, as
//     a consumer would find it: verify cannot tell deletion from loss.
//   - Order between rows of one transaction, or of transactions committed
//     within the same millisecond: their record timestamps are equal.
//   - A record in a topic the row does not route to, other than the
//     dead-letter topic: only routed topics are read.
//
// # Metrics
//
// Register describes a report as gauges for a Prometheus textfile or a
// Pushgateway, labelled with the outbox table:
//
//	pgoutbox_verify_ok                             1 when nothing is missing, mismatched or out of order
//	pgoutbox_verify_error                          1 when the run failed before a verdict
//	pgoutbox_verify_last_run_timestamp_seconds     when the run started
//	pgoutbox_verify_duration_seconds               how long it took
//	pgoutbox_verify_window_start_timestamp_seconds start of the window
//	pgoutbox_verify_window_end_timestamp_seconds   end of the window
//	pgoutbox_verify_rows                           rows of the window in the table
//	pgoutbox_verify_found_rows                     rows with a record in their topic
//	pgoutbox_verify_dead_lettered_rows             rows only in the dead-letter topic
//	pgoutbox_verify_missing_rows                   rows in no topic, older than the grace
//	pgoutbox_verify_pending_rows                   rows in no topic yet, newer than the grace
//	pgoutbox_verify_duplicate_records              records beyond a row's first
//	pgoutbox_verify_mismatched_records             records whose key, business key or topic disagree
//	pgoutbox_verify_order_breaks                   first deliveries out of commit order
//	pgoutbox_verify_records_read                   records read
//	pgoutbox_verify_unverifiable_records           records of the pruned range matching no row
package verify
