package inboxkafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxQueueBytes is Config.MaxQueueBytes when it is zero.
const DefaultMaxQueueBytes = 64 << 20

// queueBytes bounds the bytes of the records the consumer loop holds: those
// queued for a partition worker and those the worker is handling. The poll
// loop asks room for how many records to poll: as many as fit under the
// bound at the size of the records it polled last (one when it knows none,
// or when nothing is held: a record larger than the bound is still taken,
// alone), waiting while none fits. It adds what it polled; the worker gives
// a record's bytes back once it is settled.
type queueBytes struct {
	max int64

	mu   sync.Mutex
	held int64
	peak int64         // the most held at once, for tests
	free chan struct{} // closed and replaced when bytes are given back
	// waiting is true while waitRoom waits for bytes, for tests.
	waiting bool
	gauge   func(float64) // the queue_bytes gauge
}

func newQueueBytes(max int64, gauge func(float64)) *queueBytes {
	return &queueBytes{max: max, free: make(chan struct{}), gauge: gauge}
}

// recordBytes is what a record counts against the bound: its key, value and
// headers.
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// room waits until at least one record of size est (0: unknown) fits
// under the bound, or nothing is held, and returns how many fit, at most
// most; it returns 0 when ctx ends first.
func (q *queueBytes) room(ctx context.Context, est int64, most int) int {
	for {
		q.mu.Lock()
		n := 1
		if est > 0 {
			n = int(min((q.max-q.held)/est, int64(most)))
		}
		if q.held == 0 {
			n = max(n, 1)
		} else if q.held >= q.max {
			n = 0
		}
		if n > 0 {
			q.waiting = false
			q.mu.Unlock()
			return n
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
			return 0
		}
	}
}

// add counts n more bytes as held.
func (q *queueBytes) add(n int64) {
	q.mu.Lock()
	q.held += n
	q.peak = max(q.peak, q.held)
	q.gauge(float64(q.held))
	q.mu.Unlock()
}

// give returns n bytes counted with add.
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
