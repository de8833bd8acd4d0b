package relaytype

import "context"

// SharedBuffer is a byte budget that several relays of one process draw
// their record bytes from (Config.SharedBuffer). relay.NewSharedBuffer
// returns the implementation; docs/fleet.md says how it shares the budget
// out (each relay streaming is guaranteed a minimum share, so one stuck
// relay never starves the others).
type SharedBuffer interface {
	// Join adds a relay's session, whose record bytes are at most limit,
	// and returns its share of the budget.
	Join(limit int64) BufferShare
	// Size is the budget in bytes.
	Size() int64
	// Used is the bytes the shares hold now.
	Used() int64
	// Resize makes the budget size bytes. Shares holding more than the
	// new size allows keep it until they give it back.
	Resize(size int64)
}

// BufferShare is one relay session's share of a SharedBuffer: the reader
// takes an event's bytes before it queues the event, the sink gives a
// batch's bytes back once Kafka acknowledged it.
type BufferShare interface {
	// TryTake takes n bytes if the share may have them now.
	TryTake(n int64) bool
	// Take waits until the share may have n bytes and takes them, or
	// returns ctx's error having taken nothing.
	Take(ctx context.Context, n int64) error
	// Give gives back n bytes taken before.
	Give(n int64)
	// Leave gives back what the share still holds and ends it.
	Leave()
}
