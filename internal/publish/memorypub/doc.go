// Package memorypub is a publisher that keeps what it is given in memory:
// the proof that a broker plugs into the relay through publish.Publisher
// alone. Importing it registers it as "memory" (relay.Config.Sink); it
// implements Publisher, Transactional and Reader, with fencing by identity.
// Tests read what a slot's relays published with StoreOf, and make writes
// never answer, as the writes of a relay killed mid-write (Store.Freeze).
//
// It is for tests: what it holds is lost with the process.
package memorypub
