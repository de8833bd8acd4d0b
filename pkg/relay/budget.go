package relay

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// budget bounds the record bytes held between the WAL reader and Kafka: the
// reader takes an event's cost before it queues the event, and the sink gives
// a batch's costs back once Kafka acknowledged the batch. With the queue
// bounded in events alone, large payloads could hold BatchSize events in the
// queue and as many in the batch being written.
type budget struct {
	sem   *semaphore.Weighted
	size  int64
	gauge prometheus.Gauge
}

func newBudget(size int, gauge prometheus.Gauge) *budget {
	return &budget{sem: semaphore.NewWeighted(int64(size)), size: int64(size), gauge: gauge}
}

// cost is what ev takes from the budget: its record size (key, value and
// headers), at least 1, and at most the whole budget, so that a record
// larger than the budget still passes, alone.
func (b *budget) cost(ev *event) int64 {
	return min(max(int64(recordSize(&ev.msg)), 1), b.size)
}

// tryTake takes n if it is free now.
func (b *budget) tryTake(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.gauge.Add(float64(n))
	return true
}

// take waits until n is free and takes it, or returns ctx's error having
// taken nothing.
func (b *budget) take(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.gauge.Add(float64(n))
	return nil
}

// give returns n, the sum of costs taken before.
func (b *budget) give(n int64) {
	if n == 0 {
		return // an empty batch
	}
	b.sem.Release(n)
	b.gauge.Sub(float64(n))
}
