// Package rabbitmqpub is the relay's RabbitMQ streams publisher
// ("rabbitmq", a publish.Publisher): each record goes to the stream named
// by its topic (the topic column or the topic template), confirmed by the
// stream's publish confirmation.
//
// # Deduplication
//
// A RabbitMQ stream drops a message whose publishing ID is not above the
// last one stored for its producer name, and confirms it all the same.
// The publisher names its producer after the slot and the slot's
// incarnation ("pgoutbox.<slot>.<incarnation>", Config.Incarnation) and
// derives each record's publishing ID from its WAL position: the commit
// LSN shifted left by 16 bits, plus the record's index in its transaction
// (PublishingID). A replay after a crash writes the same IDs, and the
// stream drops what it already holds: no duplicates, for as long as the
// stream keeps the producer's sequence (its retention; docs/sinks.md).
//
// The incarnation is part of the name because an ID is only meaningful
// on the WAL history it came from: after a failover to a standby, or a
// restored backup, new transactions can reuse positions the old history
// already published, and under the old name the stream would drop them
// as duplicates. Without Config.Incarnation the producer is named after
// the session's slot identity (publish.Session.Slot, which the relay
// gives in every mode: "pgoutbox-relay/<system id>/<slot>/<incarnation>/<timeline>"),
// which holds the incarnation and the timeline too; without either the publisher uses no
// producer name, so the stream deduplicates nothing (at-least-once; the
// inbox covers it). Records without a WAL position (a backfill's), of a
// transaction past 65,535 records, or past 128 TiB of WAL, go without
// deduplication too, in order (the publisher waits for the confirmations
// in flight before it switches producers).
//
// # Headers and order
//
// The record's headers (the message contract's, then the row's own)
// become the message's application properties, as strings under the same
// names; the payload is the message body, byte for byte, and the commit
// time its creation time. A stream is stored in the order written, so the
// records of an aggregate stay in commit order; a consumer that needs
// parallelism uses a single active consumer per stream
// (pkg/inbox/inboxrabbitmq).
//
// # Confirmation
//
// Write sends each record and returns once the stream confirmed it (with
// a replicated stream, a quorum of its members has it). A record that
// fails makes every later record of its stream in the same Write fail
// too, so a retry writes them again in order, and the stream drops those
// it already holds. A Write ends within the confirmation timeout and a
// grace even when the client cannot take its records (a node that reads
// nothing blocks the client's Send): it fails as a whole, and the next
// Write connects anew (see Write).
//
// # Reading back
//
// Read (publish.Reader) reads the streams for relay verify and recovery's
// "already there" check, with a client of its own (read.go).
//
// # Logging
//
// The stream client's log lines go to log/slog's default logger, as
// internal/streamlog (imported for that) sets at init.
package rabbitmqpub
