// Package loophook joins package inbox and its Kafka consumer loop
// (package inboxkafka) without exporting the inbox's machinery: inbox sets
// Internals at init, and the loop asks it for the internals of the Inbox it
// was given, typed by an interface of its own. Nothing outside
// pkg/inbox can import it.
package loophook
