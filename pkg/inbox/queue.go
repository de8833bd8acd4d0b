package inbox

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
)

// DefaultMaxQueueBytes is ConsumerConfig.MaxQueueBytes when it is zero.
const DefaultMaxQueueBytes = 64 << 20

// queueBytes bounds the bytes of the records the consumer loop holds: those
// queued for a partition worker and those the worker is handling. The
// fetching loop takes a record's size before queueing it and waits while
// the bound is reached; the worker gives it back once the record is
// settled. A record larger than the bound is taken alone (when nothing else
// is held), so it cannot stop the loop.
type queueBytes struct {
	max int64

	mu   sync.Mutex
	held int64
	peak int64         // the most held at once, for tests
	free chan struct{} // closed and replaced when bytes are given back
	// waiting is true while take waits for bytes, for tests.
	waiting bool
	gauge   func(float64) // the queue_bytes gauge
}

func newQueueBytes(max int64, gauge func(float64)) *queueBytes {
	return &queueBytes{max: max, free: make(chan struct{}), gauge: gauge}
}

// recordBytes is what a record counts against the bound: its key, value and
// headers, the bytes kafka-go holds for it.
func recordBytes(m *kafka.Message) int64 {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// take waits until n more bytes fit under the bound (or nothing is held)
// and counts them as held; it returns false when ctx ends first.
func (q *queueBytes) take(ctx context.Context, n int64) bool {
	for {
		q.mu.Lock()
		if q.held == 0 || q.held+n <= q.max {
			q.held += n
			q.peak = max(q.peak, q.held)
			q.waiting = false
			q.gauge(float64(q.held))
			q.mu.Unlock()
			return true
		}
		q.waiting = true
		free := q.free
		q.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			q.mu.Lock()
			q.waiting = false
			q.mu.Unlock()
			return false
		}
	}
}

// give returns n bytes taken with take.
func (q *queueBytes) give(n int64) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	q.held -= n
	q.gauge(float64(q.held))
	close(q.free)
	q.free = make(chan struct{})
	q.mu.Unlock()
}

// reset forgets what the workers of a finished Run left queued.
func (q *queueBytes) reset() {
	q.mu.Lock()
	q.held = 0
	q.gauge(0)
	q.mu.Unlock()
}
