package inbox_test

import (
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// queueState reports the consumer loop's byte accounting: the bytes held
// now, the most held at once, and whether the fetching loop is waiting for
// bytes.
func queueState[TTx any](c *inboxkafka.Consumer[TTx]) (held, peak int64, waiting bool) {
	return loophook.QueueState(c)
}
