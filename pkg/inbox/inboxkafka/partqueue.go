package inboxkafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionQueue holds the polled records of one partition for its worker,
// in order. It never blocks the poll loop: what it holds is bounded by
// Config.MaxQueueBytes across partitions (queueBytes), and by
// PartitionQueue while the worker is retrying (the partition is paused).
type partitionQueue struct {
	mu    sync.Mutex
	recs  []*kgo.Record
	head  int           // recs[head:] are queued
	ready chan struct{} // holds a token when records were pushed
}

func newPartitionQueue() *partitionQueue {
	return &partitionQueue{ready: make(chan struct{}, 1)}
}

// push queues rs.
func (q *partitionQueue) push(rs []*kgo.Record) {
	q.mu.Lock()
	q.recs = append(q.recs, rs...)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take appends up to n queued records to buf and returns it.
func (q *partitionQueue) take(buf []*kgo.Record, n int) []*kgo.Record {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := min(q.head+n, len(q.recs))
	buf = append(buf, q.recs[q.head:end]...)
	clear(q.recs[q.head:end])
	q.head = end
	switch {
	case q.head == len(q.recs):
		q.recs, q.head = q.recs[:0], 0
	case q.head > len(q.recs)/2:
		k := copy(q.recs, q.recs[q.head:])
		clear(q.recs[k:])
		q.recs, q.head = q.recs[:k], 0
	}
	return buf
}

// len is how many records are queued.
func (q *partitionQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.recs) - q.head
}
