package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// In exactly-once mode every row arrives once for a read_committed reader
// (kcat's default) across a restart of the relay.
func TestExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.ExactlyOnce = true })
	run := b.start(t)
	var ids []string
	for i := range 20 {
		ids = append(ids, b.insert(t, msg(fmt.Sprintf("agg-%d", i%3), i))...)
	}
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	b.start(t)
	var more []outbox.Message
	for i := range 10 {
		more = append(more, msg(fmt.Sprintf("agg-%d", i%3), 100+i))
	}
	ids = append(ids, b.insert(t, more...)...)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d rows", len(recs), len(ids))
	}
}
