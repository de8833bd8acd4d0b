package inboxkafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// worker handles the messages of one partition, one at a time, in order.
// It lives from the partition's assignment to its revoke or loss.
type worker[TTx any] struct {
	c  *Consumer[TTx]
	g  *group[TTx]
	tp topicPartition
	// q queues the partition's polled records; queueing never blocks the
	// poll loop (nor a rebalance).
	q      *partitionQueue
	ctx    context.Context // ends when the worker is stopped
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	// lost is set before a stop for a lost partition: nothing more is
	// marked for commit.
	lost atomic.Bool

	// inHand counts the records of the batch being handled that are not
	// settled yet.
	inHand atomic.Int64

	pauseMu  sync.Mutex
	retrying bool // the current message waits for another attempt
	paused   bool // fetching the partition is paused (retrying, queue full)

	// suspect counts the coming messages that may repeat an attempt that
	// killed a process: the first BatchSize after the worker starts that
	// were not settled before (the previous owner of the partition settled
	// its messages in order and had at most one batch in flight; the ones
	// it settled past its committed offset come back as duplicates and are
	// not counted). Those run one at a time, each attempt counted by
	// markAttempt before it starts (Handler only).
	suspect int
}

// newWorker returns the worker of a partition just assigned to the member.
func newWorker[TTx any](g *group[TTx], tp topicPartition) *worker[TTx] {
	ctx, cancel := context.WithCancel(g.ctx)
	return &worker[TTx]{c: g.c, g: g, tp: tp, q: newPartitionQueue(),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), suspect: g.c.cfg.BatchSize}
}

// quit stops the worker after its current attempt; lost says the partition
// was lost, so nothing more is committed.
func (w *worker[TTx]) quit(lost bool) {
	if lost {
		w.lost.Store(true)
	}
	w.cancel()
}

// maybePause pauses fetching the partition while its worker retries a
// message and PartitionQueue records wait behind it, so that a stuck
// partition neither fills MaxQueueBytes for the others nor holds them
// back. A partition is not paused merely for being behind: kgo drops a
// paused partition's buffered records, and fetches a resumed one only
// after the fetch in flight (up to MaxWait on idle partitions).
func (w *worker[TTx]) maybePause() {
	w.pauseMu.Lock()
	defer w.pauseMu.Unlock()
	if !w.paused && w.retrying && w.q.len()+int(w.inHand.Load()) >= w.c.cfg.PartitionQueue {
		w.paused = true
		w.g.cl.PauseFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
	}
}

// setRetrying records whether the current message waits for another
// attempt, pausing the partition (see maybePause) or resuming it.
func (w *worker[TTx]) setRetrying(retrying bool) {
	w.pauseMu.Lock()
	w.retrying = retrying
	resume := !retrying && w.paused
	if resume {
		w.paused = false
		w.g.cl.ResumeFetchPartitions(map[string][]int32{w.tp.topic: {w.tp.partition}})
	}
	w.pauseMu.Unlock()
	if retrying {
		w.maybePause()
	}
}

// run handles the partition's queue until the worker is stopped; the rest
// of the queue is then left for the partition's next owner (its offsets
// are not committed).
func (w *worker[TTx]) run() {
	defer close(w.done)
	defer w.drop()
	ctx := w.ctx
	batch := make([]*kgo.Record, 0, w.c.cfg.BatchSize)
	for {
		batch = w.q.take(batch[:0], w.c.cfg.BatchSize)
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.q.ready:
			}
			continue
		}
		if ctx.Err() != nil {
			for _, r := range batch {
				w.c.queue.give(recordBytes(r))
			}
			return
		}
		w.inHand.Store(int64(len(batch)))
		if len(batch) > 1 && w.suspect == 0 && w.handleBatch(ctx, batch) {
			w.inHand.Store(0)
			for _, r := range batch {
				w.c.queue.give(recordBytes(r))
			}
			continue
		}
		for i, r := range batch {
			if ctx.Err() != nil {
				for _, r := range batch[i:] {
					w.c.queue.give(recordBytes(r))
				}
				return
			}
			mark := w.suspect > 0 && w.c.cfg.Handler != nil
			if !w.handle(ctx, r, mark) {
				w.suspect = max(w.suspect-1, 0)
			}
			w.inHand.Add(-1)
			w.c.queue.give(recordBytes(r))
		}
	}
}

// drop gives back the bytes of the records left queued when the worker
// stops, and resumes the partition if it was paused: a pause outlives the
// assignment.
func (w *worker[TTx]) drop() {
	for _, r := range w.q.take(nil, w.q.len()) {
		w.c.queue.give(recordBytes(r))
	}
	w.setRetrying(false)
}

// handleBatch tries the batch fast path; false means nothing was committed
// and the messages must be handled one at a time.
func (w *worker[TTx]) handleBatch(ctx context.Context, batch []*kgo.Record) bool {
	c := w.c
	if c.cfg.Handler == nil {
		return false
	}
	msgs := make([]inbox.Message, len(batch))
	for i, r := range batch {
		var bad *inbox.Result
		if msgs[i], bad = c.core.MessageFromKafka(kafkaRecordOf(r)); bad != nil {
			return false
		}
	}
	work := context.WithoutCancel(ctx)
	// A span per message; the handler of each runs in its own.
	ctxs := make(map[int64]context.Context, len(msgs))
	ends := make([]func(inbox.Result, error), len(msgs))
	for i := range msgs {
		ctxs[msgs[i].Offset], ends[i] = c.core.StartDelivery(work, c.cfg.GroupID, &msgs[i])
	}
	handler := func(ctx context.Context, tx TTx, msg inbox.Message) (string, error) {
		if sctx, ok := ctxs[msg.Offset]; ok {
			ctx = sctx
		}
		return c.cfg.Handler(ctx, tx, msg)
	}
	results, ok := c.core.ProcessBatch(work, msgs, handler)
	for i, end := range ends {
		if ok {
			end(results[i], nil)
		} else {
			end(inbox.Result{}, errBatchRolledBack)
		}
	}
	if !ok {
		return false
	}
	if c.cfg.OnResult != nil {
		for i := range msgs {
			c.cfg.OnResult(msgs[i], results[i])
		}
	}
	// Committing the last offset commits the partition up to it.
	w.settled(batch[len(batch)-1])
	return true
}

// errBatchRolledBack ends the spans of a batch that was rolled back to be
// handled one message at a time (each then gets a span of its own).
var errBatchRolledBack = errors.New("inbox: batch rolled back; handled one message at a time")

// handle settles one message (loopcore.Deliverer.Handle): it returns once
// the offset is marked for commit, when ctx ends during a retry wait, or
// after stopping the run on a conflict under ConflictPolicyStop. The
// current attempt itself always finishes, even when ctx ends.
// settledBefore reports that an earlier delivery had settled the message
// (a Duplicate, or a FAILED_FINAL message whose dead letter was written).
func (w *worker[TTx]) handle(ctx context.Context, r *kgo.Record, mark bool) (settledBefore bool) {
	km := kafkaRecordOf(r)
	settled, before, stop := w.g.deliver.Handle(ctx, km, mark, w.setRetrying)
	switch {
	case stop != nil:
		w.g.stop(fmt.Errorf("inbox: stopped at record %s/%d@%d: %w", km.Topic, km.Partition, km.Offset, stop))
	case settled:
		w.settled(r)
	}
	return before
}

// settled marks r's offset for commit once the inbox settled it (after
// the database commit) and wakes the committer. A lost partition marks
// nothing: another member may own it.
func (w *worker[TTx]) settled(r *kgo.Record) {
	if w.lost.Load() {
		return
	}
	w.g.cl.MarkCommitRecords(r)
	w.g.marked()
}

// kafkaRecordOf is r as the inbox's record type.
func kafkaRecordOf(r *kgo.Record) inbox.KafkaRecord {
	kr := inbox.KafkaRecord{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Key: r.Key, Value: r.Value, Time: r.Timestamp}
	if len(r.Headers) > 0 {
		kr.Headers = make([]inbox.KafkaHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = inbox.KafkaHeader(h)
		}
	}
	return kr
}
