// Package wal is the relay's first stage: it reads the replication slot
// (pgoutput), hands each row to the decoder and the decoded events to the
// queue, and confirms to the server, in standby status updates, what the
// ack tracker says Kafka acknowledged. It skips the transactions a restart
// replays that the state row records as acknowledged.
//
// The WAL reader streams the slot with pgoutput (proto_version 1, so
// Postgres spills large transactions to disk instead of the relay holding
// them; messages on) for the publication, which covers the outbox table
// with publish = 'insert'. It caches relation messages and checks the
// table's columns at start and at every relation message. A missing or
// mistyped column at start ends Run with an error wrapping ErrTableColumns
// that names each one. A relation message with such columns (the table
// changed while streaming, or in the WAL being replayed) ends Run the same
// way under InvalidStop. By default the rows of that layout are invalid
// instead (reason bad-columns, the detail naming the columns) until a
// relation message brings usable columns back; stopping would leave the
// relay stuck even after the change is reverted, since every replay reads
// the WAL written meanwhile. Payload columns of type jsonb, json and text
// are sent as their text, bytea as its raw bytes.
//
// # Acknowledgement
//
// The slot's confirmed_flush_lsn is the single record of what was
// published. The relay confirms the end LSN of a transaction only when
// Kafka acknowledged every event of it and of every transaction before it
// (the contiguous prefix; see internal/acktrack). Transactions with no
// outbox event complete at once, but also only in order. Status updates set
// the write, flush and apply positions explicitly; they go out at once when
// the server asks, within 100ms after the confirmed position advances (so
// a crash replays little more than what was in flight), and at least
// every StatusInterval (or a third of the liveness bound, if shorter; see
// Liveness). When nothing is in
// flight, the relay confirms the server's WAL end from its keepalives, so
// an idle outbox does not pin WAL while other tables are busy. No position
// past the catalog check's fence is confirmed (see Partitioned tables and
// renames).
//
// After any restart or reconnect, streaming resumes at confirmed_flush_lsn:
// events of the transactions in flight at the time are published again
// (consumers deduplicate on message-id, see package inbox); none is lost.
// After a server restart PG 15 moves confirmed_flush_lsn back to the
// slot's last checkpoint, minutes of WAL maybe; so at every session start
// (start, reconnect, taking over as a standby) the relay skips the
// replayed transactions that end at or before the confirmed position of
// its state row (see Gaps in internal/slotstate), which it writes only after Kafka acknowledged
// them: they are neither published again nor hold back confirmation, and
// pgoutbox_relay_replay_skipped_total counts them. Duplicates after a
// restart are then what Kafka acknowledged since the last state write
// (written at most every 200ms while events are acknowledged). A state row
// of another system or timeline skips nothing.
//
// Failed Kafka writes are retried with backoff from RetryBackoff up to
// MaxRetryBackoff and nothing after them is acknowledged meanwhile (see
// Invalid rows for the records Kafka refuses for good). A lost
// replication connection is re-opened with the same backoff. Permanent
// errors end Run with one error naming the cause (IsPermanent reports them):
// bad configuration, refused credentials or privileges, a missing slot or
// publication with NoCreate, an invalidated slot, unusable table columns at
// start, Kafka authentication or cluster authorization failures, a
// dead-letter record Kafka refuses.
//
// On cancellation Run stops reading, lets Kafka acknowledge what is in
// flight (for at most ShutdownTimeout), confirms the final position and
// returns nil.
package wal
