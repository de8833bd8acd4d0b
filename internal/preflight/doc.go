// Package preflight holds what the relay's commands check of the database
// and the brokers before they act: that the database answers and meets the
// prerequisites and that a Kafka broker answers (`relay run` fails at once
// with one line naming the cause instead of entering the engine's
// reconnect loop), which of the relay's database objects exist (so setup
// and teardown can say what they created, found or dropped), and the
// wording of a failed connection for the one line on stderr.
//
// internal/relaycli calls it; it reaches the engine only through pkg/relay.
package preflight
