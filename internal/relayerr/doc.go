// Package relayerr holds the relay's sentinel errors (exposed by package
// relay), IsPermanent, and the one table of Kafka errors the relay acts on
// (Classify).
package relayerr
