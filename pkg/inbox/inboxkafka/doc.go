// Package inboxkafka is the Kafka consumer loop of an inbox.Inbox, on
// franz-go (kgo): New(&Config[TTx]{Brokers, GroupID, Topics, Inbox, Handler
// or ExternalHandler}) and Consumer.Run. It uses the inbox's transport-free
// API (inbox.Process and its kin, inbox.KafkaRecord, inbox.DeadLetterWriter)
// and reaches the rest of the inbox's machinery (the batch path, the crash
// loop's attempt marks, metrics, tracing) through an internal package, so
// that package inbox exports no hooks for it.
//
//	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing"})
//	...
//	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
//		Brokers: []string{"localhost:9092"}, GroupID: "billing", Topics: []string{"outbox.payment"},
//		Inbox: in, Handler: charge,
//	})
//	...
//	err = c.Run(ctx) // until ctx ends
//
// Consumer runs a franz-go (kgo) client in a consumer group, reading
// read_committed by default (Config.Isolation): the records of an
// aborted or still open Kafka transaction, as an exactly-once relay leaves
// when it is fenced, never reach a handler, and transaction markers are not
// records. The message ID and business key come from the relay's
// message-id and business-key headers; a record without either cannot be
// deduplicated and is dead-lettered with reason "missing-headers" (never
// dropped, never processed). A record's offset is marked for commit only
// after the database commit (or once its dead letter is written) and
// committed in the background, at most every 100 ms (so a crash
// redelivers at most that much more, each a Duplicate), and at once on a
// revoke and at a graceful stop. Each partition has its own
// worker, started when the partition is assigned: a message being retried
// (inbox.Retry, inbox.Busy, database unavailable) holds its partition, in order, while
// the other partitions proceed: once PartitionQueue records wait behind a
// retried message, fetching pauses for that partition alone until the
// message is settled. The loop polls no more records while those it holds
// reach Config.MaxQueueBytes (default 64 MiB), so memory stays
// bounded however large the records (plus the one fetch response per
// broker the client buffers).
//
// Rebalances are known, not guessed (kgo.BlockRebalanceOnPoll and the
// OnPartitions callbacks): a revoked partition's worker finishes its
// current message, what it settled is committed, and only then does the
// partition move to another member, so a rebalance redelivers nothing that
// was settled; a lost partition (an expired session) commits nothing more,
// and its redelivered messages answer inbox.Duplicate. Keep
// Config.RebalanceTimeout above the longest handler run.
//
// Dead-lettered messages are written to Config.DeadLetterTopic
// (default "inbox.dlq") with acks from every in-sync replica before their
// offset is committed, with headers dlq-reason, dlq-detail, dlq-consumer,
// dlq-attempts, dlq-original-topic, dlq-original-partition and
// dlq-original-offset added to the original ones (message-id,
// business-key, ...). The row then records dead_lettered_at, so a
// redelivery of a FAILED_FINAL message is acknowledged without a second
// dead letter; a crash between the write and that record can write it
// twice, never lose it. A conflict under inbox.ConflictPolicyDeadLetter and a
// record without headers or with an invalid key have no row of their own:
// each delivery of one is dead-lettered. The client retries fetch errors
// by itself; those it reports do not stop Run either: they are counted and
// logged, and the next poll waits a backoff. TLS and SASL are the relay's
// (Config.TLS and SASL: PLAIN, SCRAM, OAUTHBEARER from a token
// file, AWS MSK IAM). On context cancellation Run finishes the current
// message of each partition, commits what settled, leaves the group,
// closes its clients and returns nil.
//
// The loop's tests (package inbox's consumer tests and this package's)
// run on kfake and on Apache Kafka 4 (docs/kafka.md).
package inboxkafka
