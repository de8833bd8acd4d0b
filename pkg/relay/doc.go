// Package relay publishes committed outbox rows to Kafka at-least-once, in
// commit order per aggregate, acknowledging the WAL only after Kafka did.
package relay
