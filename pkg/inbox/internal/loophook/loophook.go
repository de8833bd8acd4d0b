package loophook

// Hook hands out the consumer-loop internals of the Inbox that embeds it.
// Its zero value hands out nil.
type Hook struct {
	internals func() any
}

// New returns a Hook whose Inbox's internals are internals().
func New(internals func() any) Hook { return Hook{internals: internals} }

// hook is promoted to the Inbox that embeds h; being unexported in this
// package, only Internals can call it.
func (h *Hook) hook() *Hook { return h }

// Internals returns the consumer-loop internals of inbox, an
// *inbox.Inbox[TTx], or nil for anything else (an Inbox not made by
// inbox.New too).
func Internals(inbox any) any {
	x, ok := inbox.(interface{ hook() *Hook })
	if !ok || x.hook().internals == nil {
		return nil
	}
	return x.hook().internals()
}
