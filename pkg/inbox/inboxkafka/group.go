package inboxkafka

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loopcore"
)

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

// group is one Run of the consumer loop in its consumer group: the poll
// loop, a worker per assigned partition, and the rebalance callbacks that
// start and stop the workers. With kgo.BlockRebalanceOnPoll the callbacks
// run between two polls only, so every record polled before a revoke is
// queued for its worker before the revoke stops it.
type group[TTx any] struct {
	c   *Consumer[TTx]
	ctx context.Context // the run's: ends on a stop
	dlq *inbox.DeadLetterWriter
	// deliver settles each record (the loops' shared logic).
	deliver *loopcore.Deliverer[TTx]
	stop    context.CancelCauseFunc
	cl      *kgo.Client

	mu      sync.Mutex
	workers map[topicPartition]*worker[TTx]
	stopped bool // the run is stopping: no new workers

	// commit holds a token when offsets were marked since the last commit.
	commit chan struct{}
}

// commitTimeout bounds an offset commit.
const commitTimeout = 30 * time.Second

func newGroup[TTx any](c *Consumer[TTx], ctx context.Context, dlq *inbox.DeadLetterWriter, stop context.CancelCauseFunc) *group[TTx] {
	g := &group[TTx]{c: c, ctx: ctx, dlq: dlq, stop: stop, workers: make(map[topicPartition]*worker[TTx]),
		commit: make(chan struct{}, 1)}
	g.deliver = &loopcore.Deliverer[TTx]{Core: c.core, In: c.in, Log: c.log, Group: c.cfg.GroupID,
		Handler: c.cfg.Handler, External: c.cfg.ExternalHandler, OnResult: c.cfg.OnResult,
		DeadLetter: func(ctx context.Context, km inbox.KafkaRecord, res inbox.Result) error {
			return c.core.WriteDeadLetter(ctx, dlq, km, res)
		},
		DeadLetterDest: c.cfg.DeadLetterTopic}
	return g
}

// poll takes records from the client and queues each for its partition's
// worker, until ctx ends. It polls at most MaxPollRecords at a time, and
// only as many as fit under MaxQueueBytes (see queueBytes.room), and allows
// rebalances again right after queueing them: a rebalance waits for
// queueing, never for a handler.
func (g *group[TTx]) poll(ctx context.Context) {
	var (
		fe  fetchErrors
		est int64 // the mean size of the records polled last
	)
	for {
		most := g.c.queue.room(ctx, est, g.c.cfg.MaxPollRecords)
		if most == 0 {
			return
		}
		fetches := g.cl.PollRecords(ctx, most)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			g.cl.AllowRebalance()
			return
		}
		var (
			failed    bool
			errTopic  string
			errPart   int32
			errFailed error
		)
		fetches.EachError(func(t string, p int32, err error) {
			if !failed {
				failed, errTopic, errPart, errFailed = true, t, p, err
			}
		})
		var n, size int64
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			n += int64(len(p.Records))
			size += g.dispatch(p)
		})
		if n > 0 {
			est = max(size/n, 1)
		}
		g.cl.AllowRebalance()
		switch {
		case failed:
			if !g.c.fetchFailed(ctx, &fe, errTopic, errPart, errFailed) {
				return
			}
		case n > 0:
			fe.n = 0
		}
	}
}

// dispatch queues the records of p for the partition's worker, pauses the
// partition when its worker is stuck (see worker.maybePause), and returns
// the records' bytes.
func (g *group[TTx]) dispatch(p kgo.FetchTopicPartition) (size int64) {
	if len(p.Records) == 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := topicPartition{p.Topic, p.Partition}
	w := g.workers[k]
	if w == nil {
		if g.stopped {
			return 0
		}
		// assigned runs first for every partition (BlockRebalanceOnPoll);
		// this is a safety net.
		w = g.startLocked(k)
	}
	for _, r := range p.Records {
		n := recordBytes(r)
		size += n
		g.c.queue.add(n)
	}
	w.q.push(p.Records)
	w.maybePause()
	return size
}

// assigned starts a worker for each newly assigned partition.
func (g *group[TTx]) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	for t, ps := range assigned {
		for _, p := range ps {
			if k := (topicPartition{t, p}); g.workers[k] == nil {
				g.startLocked(k)
			}
		}
	}
}

// revoked stops the workers of the revoked partitions, each after its
// current message, and commits what they settled before the partitions
// move to another member.
func (g *group[TTx]) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	g.stopWorkers(revoked, false)
	g.commitMarked(ctx)
}

// lost stops the workers of partitions the member lost (its session
// expired, a fatal group error): another member may own them already, so
// nothing more is committed for them.
func (g *group[TTx]) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	g.stopWorkers(lost, true)
}

// startLocked starts the worker of k; g.mu is held.
func (g *group[TTx]) startLocked(k topicPartition) *worker[TTx] {
	w := newWorker(g, k)
	g.workers[k] = w
	go w.run()
	return w
}

// stopWorkers stops the workers of the partitions in tps and waits for them.
func (g *group[TTx]) stopWorkers(tps map[string][]int32, lost bool) {
	g.mu.Lock()
	var ws []*worker[TTx]
	for t, ps := range tps {
		for _, p := range ps {
			k := topicPartition{t, p}
			if w := g.workers[k]; w != nil {
				ws = append(ws, w)
				delete(g.workers, k)
			}
		}
	}
	g.mu.Unlock()
	stopAndWait(ws, lost)
}

// stopAll stops every worker and starts no more.
func (g *group[TTx]) stopAll(lost bool) {
	g.mu.Lock()
	g.stopped = true
	ws := make([]*worker[TTx], 0, len(g.workers))
	for k, w := range g.workers {
		ws = append(ws, w)
		delete(g.workers, k)
	}
	g.mu.Unlock()
	stopAndWait(ws, lost)
}

func stopAndWait[TTx any](ws []*worker[TTx], lost bool) {
	for _, w := range ws {
		w.quit(lost)
	}
	for _, w := range ws {
		<-w.done
	}
}

// marked is called by a worker after it marked an offset.
func (g *group[TTx]) marked() {
	select {
	case g.commit <- struct{}{}:
	default:
	}
}

// commitEvery is the least time between two commits of commitLoop. A
// worker marks an offset per message on the one-at-a-time path, and a
// commit per message cost the client and the broker more than the messages
// themselves (inboxbench -kafkago: the loop at BatchSize 1 took 1.8 times
// as long as kafka-go readers committing every second). After a crash at
// most this much more is redelivered, each message a Duplicate; the
// suspect window of the partition's next worker counts only messages that
// were not settled before (see worker.suspect).
const commitEvery = 100 * time.Millisecond

// commitLoop commits the marked offsets whenever workers marked some, one
// commit at a time and at most one every commitEvery (so commits of busy
// partitions coalesce), until ctx ends. A revoke and the graceful stop
// commit at once.
func (g *group[TTx]) commitLoop(ctx context.Context) {
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.commit:
		}
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		g.commitMarked(ctx)
		pace.Reset(commitEvery)
	}
}

// commitMarked commits the marked offsets, in a settle span. A failure is
// only logged: the messages are redelivered and answer inbox.Duplicate.
func (g *group[TTx]) commitMarked(ctx context.Context) {
	marked := g.cl.MarkedOffsets()
	if len(marked) == 0 {
		return
	}
	topics, partitions := make([]string, 0, len(marked)), 0
	for t, ps := range marked {
		topics = append(topics, t)
		partitions += len(ps)
	}
	slices.Sort(topics)
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	cctx, end := g.c.core.StartSettle(cctx, g.c.cfg.GroupID, topics, partitions)
	err := g.cl.CommitMarkedOffsets(cctx)
	end(err)
	if err != nil && !errors.Is(err, context.Canceled) {
		g.c.log.Warn("inbox: offset commit failed; the messages will be redelivered", "err", err)
	}
}
