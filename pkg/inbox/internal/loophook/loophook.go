package loophook

// Internals returns the consumer-loop internals of an *inbox.Inbox[TTx]
// (nil for anything else). Package inbox sets it at init.
var Internals func(inbox any) any
