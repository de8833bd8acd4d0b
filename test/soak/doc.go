// Command soak runs the relay for a long time under steady load while
// faults arrive one after another, and prints what happened: rows
// committed and delivered, duplicates, commit-to-receive latency, the
// relays' memory, goroutines and open files, and the slot's retained WAL;
// at the end it runs relay verify over the whole run. It prints; it never
// asserts on time. It exits 1 when relay verify finds a row missing (or
// mismatched, or out of order), 2 on bad usage. -exactly-once runs the
// relays with --exactly-once: relay verify, reading read_committed, should
// then find no duplicate.
//
//	go run ./test/soak -duration 1h        # make soak DURATION=1h
//	go run ./test/soak -duration 2m        # a short run
//
// It starts its own Postgres (initdb in a temporary directory), a
// three-broker kfake cluster in this process, two `relay run` processes on
// one slot (a leader and a standby, built from ./cmd/relay), and an inbox
// consumer in a process of its own. A steady writer commits single-row
// transactions at -rate. Every -fault-every it injects the next fault of a
// seeded random order (each round a permutation of all of them): a
// Postgres immediate restart, a fast restart, pg_terminate_backend of the
// walsender, a broker produce error burst, a partition leader move, a
// relay SIGKILL, a relay SIGSTOP past wal_sender_timeout, an inbox
// consumer SIGKILL. Killed processes are started again. It writes every
// interval's figures to -out/soak.csv and a plot of them to
// -out/soak.svg, and at the end a summary against the targets: each
// fault's lag recovery, and the relays' resources in the two halves of the
// run.
package main
