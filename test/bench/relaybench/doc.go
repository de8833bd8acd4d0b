// Command relaybench measures how fast the relay drains an outbox backlog
// into Kafka, against the ceiling of this machine: the raw pglogrepl
// parse-only drain rate of the same backlog. It prints figures; it asserts
// nothing.
//
// It starts a throwaway Postgres (wal_level=logical) and an in-process kfake
// broker, creates two slots, pre-inserts -n outbox rows (~-payload bytes of
// JSON, -tx rows per transaction, -conns connections in parallel), then
//
//  1. drains the first slot with a tight pglogrepl reader that only parses
//     every message, decodes the tuples and confirms periodically, up to the
//     commit that completes the backlog;
//  2. runs the built relay binary on the second slot until every event is in
//     kfake and the slot's confirmed position reached that commit's end,
//
// and prints both rates, their ratio (target: at least 0.9), the relay's
// CPU time per 1k events and its peak RSS (VmHWM). The relay's time runs
// from its process start until the broker received the produce request
// that completed the backlog (a kfake control function counts the
// records); it also prints when the first record came, the relay's
// start-up.
//
//	go run ./test/bench/relaybench -n 1000000
//
// -compare-bin drains the same backlog with a second relay binary (for
// example one built from main), on a slot of its own. -rounds N drains N
// times with each, in the order ABBA ABBA..., and prints each binary's
// medians and their ratio: a drain that follows another finds the server
// in another state (warmer caches, the last drain's WAL still being
// recycled), so a binary that always drains first or second is measured
// with that bias.
//
//	go run ./test/bench/relaybench -n 300000 -relay-bin ./relay -compare-bin ./relay-main -rounds 4
//
// -cpuprofile and -memprofile profile the relay: it then runs inside this
// binary (the same code as cmd/relay) and writes the profiles when it stops.
//
//	go run ./test/bench/relaybench -n 200000 -cpuprofile cpu.prof
//	go tool pprof -top cpu.prof
//
// -latency runs the latency mode instead (make bench-latency): a writer
// commits single-row transactions at each rate over -conns connections
// (-writer insert, the default: one INSERT in autocommit; -writer tx:
// BEGIN, outbox.Writer.InsertTx, COMMIT, three round trips and more of
// this machine's two cores), the kfake broker and a franz-go consumer
// (read_committed) run in processes of their own, and the consumer measures commit → receive.
// Per rate it also prints how long the relay, the walsender and the broker
// ran on a CPU and waited for one, and a tail line: the records slower
// than 5 ms from the writer's commit return, grouped into stalls (slow
// records less than 20 ms apart), with the largest stalls' offsets into
// the rate, so one long pause tells itself apart from steady queueing.
//
// -trace times each record's legs inside the relay (which then runs inside
// this binary, through the relay hooks of pkg/relay/relayhook): in the latency
// mode, the percentiles of commit → WAL read → Kafka write → acknowledged
// → received; in the drain mode, the relay's Kafka writes and their
// records.
//
//	go run ./test/bench/relaybench -latency 1000,5000 -conns 32 -duration 20s -trace
//
// -exactly-once runs the relay (and -compare-bin's) with --exactly-once:
// one Kafka transaction per flush; the latency mode's consumer reads
// read_committed in both modes, so it counts a record once it committed.
//
//	go run ./test/bench/relaybench -n 1000000 -exactly-once
//	go run ./test/bench/relaybench -latency 1000,5000 -conns 1 -duration 20s -exactly-once
//
// -peer-bin measures a peer's runner beside the relay in the latency mode,
// -rounds runs of each in the order ABBA, each on a slot of its own, both
// from the writer's commit return to the consumer's receipt, and prints
// each side's median p99 per rate and the ratio (the runner's contract is
// in docs/benchmarks.md).
//
//	go run ./test/bench/relaybench -latency 1000,5000 -conns 1 -duration 20s -peer-bin ./peer-runner -rounds 5
//
// -debezium drains one backlog of Debezium-layout rows (table
// outboxevent) through Debezium's embedded engine (test/debezium: the
// Postgres connector, the Outbox Event Router and the Java producer, the
// JVM at its default JIT with a 1 GB heap, -debezium-jvm) and through the
// relay (--table-format debezium), both on one Apache Kafka node (the one
// the tests fetch with Maven), -rounds drains of each in the order ABBA,
// each on a slot and a topic of its own; it prints each drain's rows/s
// (from the process start, and from its first row), CPU per 1k rows and
// peak RSS, then the medians and the ratios (make bench-debezium).
//
//	go run ./test/bench/relaybench -debezium -n 200000 -rounds 2
//
// -debezium-sink nats or rabbitmq puts Debezium Server (the distribution
// pinned in test/debezium-server/pom.xml, fetched with Maven and unpacked
// once; Java 21 or newer, from JAVA_HOME, PATH or /usr/lib/jvm) with its
// nats-jetstream or rabbitmqstream sink beside the relay's sink of that
// broker, the brokers of -sinks, both routing every row to one stream:
//
//	go run ./test/bench/relaybench -debezium -debezium-sink nats -nats-atomic -n 200000 -rounds 2
//	go run ./test/bench/relaybench -debezium -debezium-sink rabbitmq -n 200000 -rounds 2
//
// -sinks puts the relay's NATS JetStream and RabbitMQ sinks beside its
// Kafka sink (relay run --sink nats|rabbitmq): kfake, an embedded
// nats-server (internal/testenv's: JetStream on disk, sync_interval:
// always) and this machine's rabbitmq-server with the stream plugin
// (testenv's starter). In the drain mode it inserts one backlog and
// drains it -rounds times through each sink in the order ABC CBA ABC...,
// each drain on a slot of its own and into an empty topic or stream; a
// drain ends when the broker holds every row (kfake's end offsets, the
// JetStream stream's message count; for RabbitMQ 3.10, which has no
// stream statistics, the slot's confirmed position past the backlog, the
// stream's length then checked with rabbitmqctl once the node's
// statistics caught up). -nats-atomic creates
// the JetStream stream with atomic publish allowed, so the relay writes
// atomic batches instead of a publish per record. -sinks-kafka apache
// drains the Kafka sink into Apache Kafka (testenv's, a JVM of its own,
// the log on disk) instead of kfake (in the bench's process, records in
// memory), a broker that stores as the others do.
// It prints each drain's rows/s (from the process start and from the
// first row), CPU per 1k rows and peak RSS, each sink's medians and the
// ratios to the Kafka sink, and what ran beside the relay: its
// walsender's and the broker's CPU per 1k rows (for kfake and the
// nats-server, this process's) and how many cores the machine kept busy.
// With -latency each sink's broker and a
// consumer of it (franz-go, a JetStream ordered consumer, a stream
// consumer) run in processes of their own, and each run measures the
// writer's commit return → the consumer's receipt; it prints each run's
// table, then per rate each sink's median p50, p99 and max and the p99
// ratio to Kafka.
//
//	go run ./test/bench/relaybench -sinks kafka,nats,rabbitmq -n 500000 -rounds 3
//	go run ./test/bench/relaybench -sinks kafka,nats -nats-atomic -n 500000 -rounds 3
//	go run ./test/bench/relaybench -sinks kafka,nats,rabbitmq -sinks-kafka apache -n 500000 -rounds 3
//	go run ./test/bench/relaybench -sinks kafka,nats,rabbitmq -latency 1000 -conns 1 -duration 20s -rounds 3
package main
