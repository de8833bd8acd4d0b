// Command inboxbench measures what the inbox costs: messages per second
// through the inbox consumer loop with a one-INSERT handler, against the fair
// baseline a team would write instead (a hand-rolled dedup table with a
// unique constraint on the business key, claimed with INSERT ... ON CONFLICT
// DO NOTHING in the handler's transaction) and, for reference, the same
// INSERT without any dedup (franz-go PollFetches + INSERT +
// CommitRecords), in the same run, on a throwaway Postgres server and an
// in-process kfake broker. Every side uses one worker per partition and
// commits an offset only after the database commit (the baselines
// synchronously, the inbox's loop in the background).
//
// Each round runs six configurations on fresh topics: batched (the
// consumer's BatchSize=100 against the baselines in 100-message
// transactions) and one message per transaction (BatchSize=1 against the
// dedup baseline in one transaction per message and an autocommit INSERT),
// each once; the order reverses between rounds. It prints every run, the
// medians over rounds, and the inbox's cost (inbox time over baseline time,
// paired per round) as a median with its range; the target is at most 1.0x
// the dedup baseline on both paths. Each run also shows the statements and
// round trips it sent to Postgres per message (a pgx tracer on the pool),
// and on Linux the CPU time per 1,000 messages of this process (consumers
// and the kfake broker) and of the PostgreSQL server, which is steadier
// than the wall time on a busy machine.
//
// With -kafkago a kafka-go reader loop joins the round: one kafka-go Reader
// per partition in one consumer group, each handing every message to
// Inbox.Process through inboxkafkago.Record and settling it with a
// DeadLetterWriter (the loop of the inboxkafkago example, committing
// offsets every second). It is paired against the kgo loop (inboxkafka)
// one message per transaction and batched; the target is at most 1.0x
// (the kgo loop at least as fast). -loops-only runs just those loops.
//
// With -handler the handler's work changes on every side alike: insert
// (the default, one INSERT of the payload), update (one UPDATE of a
// counter row per partition, as a balance update) or noop (no statement:
// the inbox's own cost against the dedup table's claim; the plain side then
// only commits offsets).
//
// With -sql the inbox also runs on database/sql (pgx's stdlib driver over
// the same pool), batched and one message per transaction, paired against
// the inbox on pgx.
//
// With -pgstats the server loads pg_stat_statements, and each run prints
// its five costliest statements: calls, execution time in the server, and
// WAL bytes per call (where a claim row's cost shows against the dedup
// table's).
//
// With -cpuprofile FILE each one-message-per-transaction run of the inbox
// and of the dedup baseline writes a CPU profile of this process to
// FILE.inbox.N and FILE.dedup.N (N the round), for go tool pprof.
//
//	go run ./test/bench/inboxbench -n 50000 -rounds 3 [-partitions 4] [-handler insert|update|noop] [-pk] [-sql] [-kafkago [-loops-only]] [-pgstats] [-cpuprofile FILE]
package main
