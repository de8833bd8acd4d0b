package loophook

// Internals returns the consumer-loop internals of an *inbox.Inbox[TTx]
// (nil for anything else). Package inbox sets it at init.
var Internals func(inbox any) any

// QueueState reports a consumer's byte accounting (the bytes held now, the
// most held at once, and whether its poll loop waits for bytes), for the
// loop's tests in package inbox. Package inboxkafka sets it at init.
var QueueState func(consumer any) (held, peak int64, waiting bool)
