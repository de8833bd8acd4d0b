// Package contract holds the pgoutbox message contract that the outbox
// writer, the relay and the inbox must apply alike: the record header names
// (headers.go), what a message ID and a business key may hold (key.go), what
// an outbox event must hold for the relay to publish it (event.go) and the
// logical-message codec between the writer's EmitTx and the relay's decoder
// (logical.go).
//
// A key that breaks them is refused by the writer and dead-lettered with a
// reason by whichever hop meets it first (the relay, or the inbox with reason
// "invalid-key"); it never blocks a partition.
package contract
