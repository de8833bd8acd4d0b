// Package relayerr holds IsPermanent, Permanent and the one table of Kafka
// errors the relay acts on (Classify). The sentinel errors it checks are
// declared in pkg/relay/relaytype, with the public error types.
package relayerr
