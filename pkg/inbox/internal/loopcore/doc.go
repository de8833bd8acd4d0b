// Package loopcore is what the inbox's consumer loops share, whatever
// their broker (inboxkafka, inboxnats, inboxrabbitmq): their view of the
// Inbox's machinery (Internals, handed out by package inbox through
// loophook), the way one delivery is taken to a settled outcome
// (Deliverer.Handle: process, retry with backoff, dead-letter, record the
// dead letter) and the background work of a running loop (Housekeeping:
// the metrics refresh and the retention purge). A loop adds only its
// broker: fetching, converting a message into an inbox.KafkaRecord,
// writing a dead letter, and acknowledging a settled position.
package loopcore
