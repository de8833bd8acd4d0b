package loopcore

import (
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// internalsOf is the loop internals of in, false for an Inbox not made by
// inbox.New.
func internalsOf[TTx any](in *inbox.Inbox[TTx]) (Internals[TTx], bool) {
	core, ok := loophook.Internals(in).(Internals[TTx])
	return core, ok
}
