// Package kafkaclient builds the franz-go clients of the inbox (the
// consumer loop of package inboxkafka and the dead-letter writer of package
// inbox) with TLS and the SASL mechanisms of package kafkasasl, which the
// relay uses too. It imports nothing of the relay's engine.
package kafkaclient
