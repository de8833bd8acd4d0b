// Package faults is the fault suite of exactly-once mode on a real Apache
// Kafka 4 node (make test-faults): writers commit multi-row outbox
// transactions (some rolled back, some with rolled-back savepoints) while
// the relay binary runs with --exactly-once, and each fault (SIGKILL,
// SIGSTOP past the transaction timeout, a TCP cut right after EndTxn, a
// broker killed and restarted, a Postgres restart, an invalidated slot,
// CPU starvation) runs under Kafka's transaction.version 1 and 2. A
// read_committed checker then counts, per run, rows lost, rows duplicated,
// aborted reads, torn transactions, per-key order breaks and records of a
// fenced relay after its successor's.
//
// The tests skip unless PGOUTBOX_TEST_FAULTS=1; docs/semantics.md says how
// to run them and holds the measured table.
package faults
