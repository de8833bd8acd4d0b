package queue

import (
	"context"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// Queue is the hand-off from the WAL reader to the sink: slices of decoded
// events, each a transaction or less (see wal.Stream.staged), at most BatchSize
// events in all (room), their record bytes bounded by the budget. The sink
// hands emptied slices back on free for the reader to fill again.
type Queue struct {
	Events chan []decode.Event
	Room   *semaphore.Weighted // events queued: the reader takes, the sink gives back
	Free   chan []decode.Event // slices the sink is done with, for wal.Stream.staged
	Budget *Budget
}

// The sink hands emptied event slices back to the reader for reuse: at most
// freeSlices of them, of at most MaxFreeCap events each.
const (
	freeSlices = 64
	MaxFreeCap = 256 // events
)

// NewQueue returns a queue of batchSize events and a budget of its own of
// bufferBytes record bytes; gauge shows the bytes taken.
func NewQueue(batchSize, bufferBytes int, gauge prometheus.Gauge) *Queue {
	return NewQueueOf(batchSize, NewBudget(NewShared(int64(bufferBytes)), bufferBytes, gauge))
}

// NewQueueOf returns a queue of batchSize events whose record bytes come
// from budget.
func NewQueueOf(batchSize int, budget *Budget) *Queue {
	return &Queue{
		Events: make(chan []decode.Event, batchSize),
		Room:   semaphore.NewWeighted(int64(batchSize)),
		Free:   make(chan []decode.Event, freeSlices),
		Budget: budget,
	}
}

// Close ends the queue: the sink publishes what is in it, then stops.
func (q *Queue) Close() { close(q.Events) }

// Budget bounds the record bytes a relay's session holds between the WAL
// reader and Kafka: the reader takes an event's cost before it queues the
// event, and the sink gives a batch's costs back once Kafka acknowledged
// the batch. With the queue bounded in events alone, large payloads could
// hold BatchSize events in the queue and as many in the batch being
// written. The bytes come from a budget of the session's own, or from one
// it shares with the other relays of the process (see Shared).
type Budget struct {
	share relaytype.BufferShare
	limit int64
	gauge prometheus.Gauge
}

// NewBudget returns a session's budget of at most limit bytes drawn from
// shared; gauge shows the bytes taken. The session ends it with Leave.
func NewBudget(shared relaytype.SharedBuffer, limit int, gauge prometheus.Gauge) *Budget {
	l := int64(max(limit, 1))
	return &Budget{share: shared.Join(l), limit: l, gauge: gauge}
}

// Cost is what ev takes from the budget: its record size (key, value and
// headers), at least 1, and at most the session's limit, so that a record
// larger than the budget still passes, alone.
func (b *Budget) Cost(ev *decode.Event) int64 {
	return min(max(int64(decode.RecordSize(&ev.Record)), 1), b.limit)
}

// TryTake takes n if it is free now.
func (b *Budget) TryTake(n int64) bool {
	if !b.share.TryTake(n) {
		return false
	}
	b.gauge.Add(float64(n))
	return true
}

// Take waits until n is free and takes it, or returns ctx's error having
// taken nothing.
func (b *Budget) Take(ctx context.Context, n int64) error {
	if err := b.share.Take(ctx, n); err != nil {
		return err
	}
	b.gauge.Add(float64(n))
	return nil
}

// Give returns n, the sum of costs taken before.
func (b *Budget) Give(n int64) {
	if n == 0 {
		return // an empty batch
	}
	b.share.Give(n)
	b.gauge.Sub(float64(n))
}

// Leave ends the session's budget: what it still holds (events dropped
// with the session) goes back to the shared budget, and the gauge to 0.
func (b *Budget) Leave() {
	b.share.Leave()
	b.gauge.Set(0)
}
