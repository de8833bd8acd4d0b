// Package kafkaflags is the one set of Kafka connection flags (TLS and SASL)
// shared by the relay and inbox command lines, with their validation: SASL
// without TLS is refused unless explicitly allowed, and the SASL password
// is also read from a *_FILE variable.
package kafkaflags
