// Command inboxbench measures what the inbox costs: messages per second
// through the inbox consumer loop with a one-INSERT handler, against the same
// INSERT without the inbox (kafka-go FetchMessage + INSERT + CommitMessages),
// in the same run, on a throwaway Postgres server and an in-process kfake
// broker. Both sides use one worker per partition and commit each offset
// synchronously after the database write. It prints both rates and the ratio
// (target: the inbox costs at most 1.5x the baseline).
//
//	go run ./test/bench/inboxbench -n 20000 [-pk]
package main
