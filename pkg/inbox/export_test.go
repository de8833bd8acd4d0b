package inbox

// QueueState reports the consumer loop's byte accounting (see queueBytes):
// the bytes held now, the most held at once, and whether the fetching loop
// is waiting for bytes.
func QueueState[TTx any](c *Consumer[TTx]) (held, peak int64, waiting bool) {
	c.queue.mu.Lock()
	defer c.queue.mu.Unlock()
	return c.queue.held, c.queue.peak, c.queue.waiting
}
