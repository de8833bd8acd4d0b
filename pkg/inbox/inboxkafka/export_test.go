package inboxkafka

// QueueState reports c's byte accounting, for the tests: the bytes held
// now, the most held at once, and whether the poll loop waits for bytes.
func QueueState[TTx any](c *Consumer[TTx]) (held, peak int64, waiting bool) {
	q := c.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held, q.peak, q.waiting
}
