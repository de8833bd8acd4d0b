// Command relay publishes committed Postgres outbox rows to Kafka. Run
// `relay --help`; the commands live in internal/relaycli.
package main
