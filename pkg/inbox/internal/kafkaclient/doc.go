// Package kafkaclient builds the franz-go clients of the inbox (the
// consumer loop of package inboxkafka and the dead-letter writer of package
// inbox) with the relay's TLS and SASL: one implementation for both sides
// of the pipeline.
package kafkaclient
