// Package publish is the boundary between the relay's sink and a broker:
// the relay's own record type (Record, with its WAL Position), the
// Publisher interface a broker implements (with Transactional for
// exactly-once and Reader for what a destination holds), and the outcome
// of each record (Outcome, Verdict).
//
// # What the loop owns, what a publisher owns
//
// The sink (internal/sink) is broker-neutral: it collects batches from the
// queue, keeps one write in flight, retries with backoff, gives the
// buffer budget back, acknowledges transactions in the ack tracker,
// decides which records are dead-lettered (and shapes them, through
// internal/decode), and in exactly-once mode decides what progress each
// transaction commits and whether progress read back may be trusted. A
// Publisher owns the broker: its client, connections and their liveness
// guard, mapping a Record to the broker's message, its own retries that
// keep order and write nothing twice, fencing older sessions of an
// identity, and storing progress where no outbox row can write it.
//
// Kafka is one publisher (internal/publish/kafkapub); others follow it.
package publish
