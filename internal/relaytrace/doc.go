// Package relaytrace lets the relay benchmark (test/bench/relaybench
// -trace) time each event's legs inside the relay: when its WAL message
// was read, and when the Kafka write that carried it started and returned.
//
// Nothing sets the hooks in production; there each costs the relay one
// nil check per event or per write.
package relaytrace
