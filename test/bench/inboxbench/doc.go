// Command inboxbench measures what the inbox costs: messages per second
// through the inbox consumer loop with a one-INSERT handler, against the same
// INSERT without the inbox (kafka-go FetchMessage + INSERT + CommitMessages),
// in the same run, on a throwaway Postgres server and an in-process kfake
// broker. Both sides use one worker per partition and commit each offset
// synchronously after the database write.
//
// Each round runs four configurations on fresh topics: batched (the
// consumer's BatchSize=100 against the plain loop in 100-message
// transactions) and one message per transaction (BatchSize=1 against an
// autocommit INSERT), each side once; the side that goes first alternates
// between rounds. It prints every run, the medians over rounds, and the
// inbox's cost (inbox time over plain time, paired per round) as a median
// with its range; the target is at most 1.5x on the batched path. On Linux
// each run also shows the CPU time per message of this process (consumers
// and the kfake broker) and of the PostgreSQL server, which is steadier than
// the wall time on a busy machine.
//
//	go run ./test/bench/inboxbench -n 50000 -rounds 3 [-partitions 4] [-pk]
package main
