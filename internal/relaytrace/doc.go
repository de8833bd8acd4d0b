// Package relaytrace lets the relay benchmark (test/bench/relaybench
// -trace) time each event's legs inside the relay: when its WAL message
// was read, and when the Kafka write that carried it started and returned.
//
// The hooks travel in the context the relay runs under (WithHooks), the
// way net/http/httptrace carries a ClientTrace: each relay run has its
// own, and there is no package state to set or reset. Nothing sets them
// in production; there each costs the relay a nil check per event and a
// context lookup per Kafka write.
package relaytrace
