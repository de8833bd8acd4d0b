package relay_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// While Kafka refuses writes, the relay holds at most BufferBytes of
// records (queued and in the batch being retried), however many events
// BatchSize would allow; afterwards everything arrives, in order.
func TestBufferBytesBoundsMemory(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	b := setup(t, func(c *relay.Config) {
		c.BufferBytes = budget
		c.MaxRetryBackoff = 200 * time.Millisecond
	})
	var outage atomic.Int32
	outage.Store(outageNack)
	refused := refuseProduce(b.kafka, &outage)
	b.start(t)

	// 40 records of about 100 KB, one aggregate: 4 MB, far below the queue's 5,000 events
	// but four times the budget.
	pad := strings.Repeat("x", 100_000)
	var ids []string
	for tx := range 4 {
		var msgs []outbox.Message
		for i := range 10 {
			m := msg("a", tx*10+i)
			m.Payload = []byte(fmt.Sprintf(`{"n": %d, "pad": %q}`, tx*10+i, pad))
			msgs = append(msgs, m)
		}
		ids = append(ids, b.insert(t, msgs...)...)
	}

	// The reader stops once the budget is full: it holds the records that
	// fit plus the one waiting for room (in_flight_events is updated with
	// each status update).
	const fit = budget / 100_000
	testenv.WaitFor(t, 30*time.Second, "the buffer to fill up", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_buffer_bytes") > budget-100_500 &&
			b.metric(t, "pgoutbox_relay_in_flight_events") >= fit+1, nil
	})
	// Nothing more is read while the producer goes on retrying.
	n := refused.Load()
	testenv.WaitFor(t, 30*time.Second, "three more refused produce requests", func() (bool, error) {
		return refused.Load() >= n+3, nil
	})
	if got := b.metric(t, "pgoutbox_relay_buffer_bytes"); got > budget {
		t.Fatalf("buffer holds %.0f bytes, budget %d", got, budget)
	}
	if got := b.metric(t, "pgoutbox_relay_in_flight_events"); got > fit+1 {
		t.Fatalf("%.0f events read while Kafka refuses writes, want at most %d (the budget's worth and one waiting)", got, fit+1)
	}

	outage.Store(outageOff)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	assertLastCopiesInOrder(t, recs, ids)
	testenv.WaitFor(t, 30*time.Second, "the buffer to drain", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_buffer_bytes") == 0, nil
	})
}

// A record larger than the whole budget still goes through, alone; a
// budget below MaxMessageBytes is warned about.
func TestRecordLargerThanBuffer(t *testing.T) {
	t.Parallel()
	var logs testenv.SyncBuffer
	b := setup(t, func(c *relay.Config) {
		c.BufferBytes = 50_000
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	b.start(t)
	if !strings.Contains(logs.String(), "buffer bytes below max message bytes") {
		t.Errorf("no warning about the small buffer; logs:\n%s", logs.String())
	}
	pad := strings.Repeat("y", 100_000)
	var msgs []outbox.Message
	for i := range 5 {
		m := msg("a", i)
		m.Payload = []byte(fmt.Sprintf(`{"n": %d, "pad": %q}`, i, pad))
		msgs = append(msgs, m)
	}
	ids := b.insert(t, msgs...)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	assertLastCopiesInOrder(t, recs, ids)
	testenv.WaitFor(t, 30*time.Second, "the buffer to drain", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_buffer_bytes") == 0, nil
	})
}
