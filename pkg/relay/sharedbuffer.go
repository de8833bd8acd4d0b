package relay

import (
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// NewSharedBuffer returns a budget of size bytes for the relays of one
// process: give it to each one's Config.SharedBuffer, and the record bytes
// they hold between the WAL and Kafka stay under size together, each
// relay's under its BufferBytes. Each streaming relay is guaranteed a floor
// of size/(2·relays); the rest is lent to whichever needs it (see
// docs/fleet.md).
func NewSharedBuffer(size int) relaytype.SharedBuffer {
	return queue.NewShared(int64(size))
}
