// Package hookcall is the engine's side of the relay's public hook
// (pkg/relay/relayhook): it sorts the hooks of relay.Config.Hooks by the
// interfaces they implement, once, and calls them from the reader and the
// sink with read-only views of the events (no copy of a record's bytes).
//
// The hooks travel in the context the relay runs under (WithHooks), the
// way net/http/httptrace carries a ClientTrace: each relay run has its own,
// and there is no package state. Without hooks FromContext is nil, and
// every method of a nil *Hooks returns at once: the stages pay a nil check
// per event and a context lookup per Kafka write.
package hookcall
