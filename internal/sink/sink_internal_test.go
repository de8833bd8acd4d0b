package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// sinkTest is a sink on kfake, without Postgres, fed as the WAL reader
// feeds it.
type sinkTest struct {
	*Sink
	k  *testenv.Kafka
	q  *queue.Queue
	tr *acktrack.Tracker
}

// testConfig is the sink's part of a relay configuration with its
// defaults (relay.Config), writing to brokers for slot "s".
func testConfig(brokers []string) Config {
	log := slog.New(slog.DiscardHandler)
	return Config{
		Settings: kafkapub.Config{ProgressTopic: contract.DefaultProgressTopic, Producer: producer.Config{Brokers: brokers, Compression: "none",
			MaxBufferedBytes: 16<<20 + 1000000 + 1<<20, MaxMessageBytes: 1000000, RequestTimeout: 10 * time.Second, AutoCreateTopics: true,
			TransactionTimeout: 40 * time.Second, Logger: log}},
		TransactionTimeout: 40 * time.Second,
		Slot:               "s", BatchSize: 1000, RetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: 10 * time.Second,
		TopicUnavailableGrace: 5 * time.Minute, DeadLetters: &decode.DeadLetters{Topic: "outbox.dlq", MaxMessageBytes: 1000000, Logger: log},
		ProgressTopic: contract.DefaultProgressTopic, Logger: log,
	}
}

// newSinkTest is a sink of testConfig, edited by mod, on a kfake broker
// of its own, with a queue of 100 events.
func newSinkTest(t *testing.T, mod func(*Config)) *sinkTest {
	t.Helper()
	k := testenv.NewKafka(t)
	c := testConfig(k.Brokers)
	if mod != nil {
		mod(&c)
	}
	m := relaymetrics.NewMetrics(c.Slot, &pgconnect.Live{})
	c.DeadLetters.Invalid = m.Invalid
	s := NewSink(c, m)
	t.Cleanup(s.Close)
	// The queue holds every event a test queues before Run starts.
	return &sinkTest{Sink: s, k: k, q: queue.NewQueue(100, 16<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"})),
		tr: acktrack.New(0)}
}

// tx queues one WAL transaction of n events of topic, ending at end, as
// the WAL reader does (taking room and budget; a marker ends it in
// exactly-once mode).
func (st *sinkTest) tx(t *testing.T, topic string, n int, end uint64, marker bool) {
	t.Helper()
	id := st.tr.Begin()
	st.tr.Add(id, n)
	st.tr.Commit(id, end)
	evs := make([]decode.Event, 0, n+1)
	for i := range n {
		ev := decode.Event{Tx: id, Commit: time.Now(), Record: publish.Record{Topic: topic, Key: []byte("k"), Value: []byte(fmt.Sprintf("%d/%d", end, i)),
			Pos: publish.Position{Final: pglogrepl.LSN(end), Seq: i}}}
		ev.Cost = st.q.Budget.Cost(&ev)
		if !st.q.Budget.TryTake(ev.Cost) {
			t.Fatal("budget full")
		}
		evs = append(evs, ev)
	}
	if marker {
		evs = append(evs, decode.Event{Marker: true, Tx: id, Commit: time.Now(), EndLSN: end})
	}
	if !st.q.Room.TryAcquire(int64(len(evs))) {
		t.Fatal("queue full")
	}
	st.q.Events <- evs
}

// run runs the sink until the queue, closed, is drained.
func (st *sinkTest) run(t *testing.T) {
	t.Helper()
	st.q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Run(ctx, st.q, st.tr); err != nil {
		t.Fatal(err)
	}
}

// values reads topic's record values, read_committed.
func (st *sinkTest) values(t *testing.T, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.k.Brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// At-least-once: Run collects the queued transactions in batches of at
// most BatchSize, publishes them in order and acknowledges every event,
// so the tracker confirms the last transaction's end; a closed queue ends
// Run with nil.
func TestRunAtLeastOnce(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, func(c *Config) { c.BatchSize = 3 })
	if err := st.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	topic := st.k.Topic("alo")
	for i := range 4 {
		st.tx(t, topic, 2, uint64(100*(i+1)), false)
	}
	st.run(t)
	if got := st.tr.Confirmed(); got != 400 {
		t.Errorf("confirmed %d, want 400", got)
	}
	got := st.values(t, topic, 8)
	if len(got) != 8 || got[0] != "100/0" || got[7] != "400/1" {
		t.Errorf("records %q, want 8 in commit order", got)
	}
}

// Exactly-once: each WAL transaction is committed as a Kafka transaction
// with its progress record; the events are acknowledged at the commit,
// and the committed progress reads back as the last transaction's end.
func TestRunTransactional(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, nil)
	ctx := context.Background()
	h := History{SystemID: "7", Timeline: 1, SlotCreatedLSN: 1}
	if _, err := st.OpenExactlyOnce(ctx, h, 1<<40, 1<<40); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.mode().(transactional); !ok {
		t.Fatalf("mode %T after OpenExactlyOnce, want transactional", st.mode())
	}
	topic := st.k.Topic("eos")
	st.tx(t, topic, 2, 100, true)
	st.tx(t, topic, 3, 200, true)
	st.run(t)
	if got := st.tr.Confirmed(); got != 200 {
		t.Errorf("confirmed %d, want 200", got)
	}
	if got := st.values(t, topic, 5); len(got) != 5 {
		t.Errorf("records %q, want 5", got)
	}
	ps := ReadProgressStatus(ctx, &st.cfg, h, farBounds)
	if !ps.Found || ps.CommittedLSN != pglogrepl.LSN(200).String() || ps.Error != "" || !ps.Trusted {
		t.Errorf("progress %+v, want found at %s", ps, pglogrepl.LSN(200))
	}
}

// Each exactly-once commit first asks the state row to record the progress
// it commits (Recorded, with the transaction's end); when the row cannot,
// the transaction is aborted: nothing of it is acknowledged or visible.
func TestTransactionalCommitWaitsForTheStateRow(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, nil)
	ctx := context.Background()
	if _, err := st.OpenExactlyOnce(ctx, History{SystemID: "9", Timeline: 1, SlotCreatedLSN: 1}, 1<<40, 1<<40); err != nil {
		t.Fatal(err)
	}
	var asked []pglogrepl.LSN
	st.Recorded = func(_ context.Context, pos pglogrepl.LSN) error {
		asked = append(asked, pos)
		return errors.New("the state row cannot be written")
	}
	topic := st.k.Topic("recorded")
	st.tx(t, topic, 2, 100, true)
	st.tx(t, topic, 1, 200, true)
	st.q.Close()
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := st.Run(runCtx, st.q, st.tr)
	if !errors.Is(err, errTxnAborted) || !slices.Equal(asked, []pglogrepl.LSN{200}) {
		t.Fatalf("Run: %v, Recorded asked %v; want the transaction to 0/C8 aborted", err, asked)
	}
	if got := st.tr.Confirmed(); got != 0 {
		t.Errorf("confirmed %d, want 0: the transaction never committed", got)
	}
	if ps := ReadProgressStatus(ctx, &st.cfg, History{SystemID: "9", Timeline: 1, SlotCreatedLSN: 1}, farBounds); ps.Found {
		t.Errorf("progress %+v committed, want none", ps)
	}
}

// A batch of a WAL transaction that goes on (no marker yet) is written but
// not acknowledged: nothing is confirmed before the commit.
func TestTransactionalAcknowledgesAtCommit(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, nil)
	ctx := context.Background()
	if _, err := st.OpenExactlyOnce(ctx, History{SystemID: "8", Timeline: 1, SlotCreatedLSN: 1}, 1<<40, 1<<40); err != nil {
		t.Fatal(err)
	}
	st.tx(t, st.k.Topic("open"), 2, 100, false)
	st.run(t)
	if got := st.tr.Confirmed(); got != 0 {
		t.Errorf("confirmed %d before the transaction's marker, want 0", got)
	}
	if !st.eos.open || st.eos.committed {
		t.Errorf("transaction open %v, committed %v: want open, not committed", st.eos.open, st.eos.committed)
	}
}

// A Kafka transaction open inside a WAL transaction whose next batch does
// not come (a long decode gap) is committed with the part written so far
// once it has been open for half the transaction timeout: its records
// become visible to a read_committed reader, and the progress names the
// part. Before, the sink waited for the next batch with the transaction
// open, and the broker aborted it at the timeout.
func TestTransactionalCommitsPartWhenNoBatchComes(t *testing.T) {
	t.Parallel()
	st := newSinkTest(t, func(c *Config) {
		c.TransactionTimeout = 2 * time.Second
		kc := c.Settings.(kafkapub.Config)
		kc.Producer.TransactionTimeout = c.TransactionTimeout
		c.Settings = kc
	})
	ctx, cancel := context.WithCancel(context.Background())
	h := History{SystemID: "9", Timeline: 1, SlotCreatedLSN: 1}
	if _, err := st.OpenExactlyOnce(ctx, h, 1<<40, 1<<40); err != nil {
		t.Fatal(err)
	}
	topic := st.k.Topic("gap")
	st.tx(t, topic, 3, 100, false) // no marker: the WAL transaction goes on
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, st.q, st.tr) }()
	got := st.values(t, topic, 3)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("records %q visible to read_committed, want 3", got)
	}
	p, err := readProgress(context.Background(), &st.cfg, st.txn(), nil, ProgressKey(h.SystemID, st.cfg.Slot, h.Incarnation))
	if err != nil {
		t.Fatal(err)
	}
	if p.Part == nil || p.Part.FinalLSN != pglogrepl.LSN(100).String() || p.Part.Events != 3 {
		t.Fatalf("progress %+v, want the first 3 events of the transaction at %s", p, pglogrepl.LSN(100))
	}
}

// The collector returns what is queued, at most size events, keeping a
// slice that does not fit for the next batch; a batch that fills up does
// not look for the close, which the next call reports with no batch.
func TestCollector(t *testing.T) {
	t.Parallel()
	q := queue.NewQueue(10, 1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"}))
	for _, n := range []int{2, 2, 1} {
		if !q.Room.TryAcquire(int64(n)) {
			t.Fatal("room")
		}
		q.Events <- make([]decode.Event, n)
	}
	q.Close()
	c := newCollector(q, 3, 0)
	ctx := context.Background()
	for i, want := range []struct {
		n      int
		closed bool
	}{{2, false}, {3, false}} {
		b, closed, err := c.collect(ctx, time.Time{})
		if err != nil || len(b) != want.n || closed != want.closed {
			t.Fatalf("batch %d: %d events, closed %v, %v; want %d, %v", i, len(b), closed, err, want.n, want.closed)
		}
	}
	if b, closed, err := c.collect(ctx, time.Time{}); b != nil || !closed || err != nil {
		t.Fatalf("after the close: %v, %v, %v", b, closed, err)
	}
}

// farBounds are bounds of ReadProgressStatus far past any test progress.
func farBounds() (walEnd, recorded pglogrepl.LSN, err error) { return 1 << 40, 1 << 40, nil }

// sendingCollector is a collector of batches of at most size events
// without a batch timeout, on a queue of its own, and a function that
// queues n events.
func sendingCollector(size int) (*collector, func(n int)) {
	q := queue.NewQueue(100, 1<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"}))
	send := func(n int) {
		if !q.Room.TryAcquire(int64(n)) {
			panic("room")
		}
		q.Events <- make([]decode.Event, n)
	}
	return newCollector(q, size, 0), send
}

// Without a batch timeout a batch goes at once, unless hotEvents events
// were already queued when it began (they came during the last write):
// then it waits, up to its linger, for more once the queue is empty.
func TestCollectorLingersOnlyWhenHot(t *testing.T) {
	t.Parallel()
	const size = 50
	c, send := sendingCollector(size)
	c.linger = time.Hour // a linger would hang the cold collect
	ctx := context.Background()

	// Fewer than hotEvents queued: the batch goes at once.
	for range hotEvents - 1 {
		send(1)
	}
	if b, _, err := c.collect(ctx, time.Time{}); err != nil || len(b) != hotEvents-1 {
		t.Fatalf("cold batch: %d events, %v; want %d", len(b), err, hotEvents-1)
	}

	// hotEvents queued: the batch waits for what comes later, here until
	// it is full.
	for range hotEvents {
		send(1)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		send(size - hotEvents)
	}()
	if b, _, err := c.collect(ctx, time.Time{}); err != nil || len(b) != size {
		t.Fatalf("hot batch: %d events, %v; want %d (the later ones with them)", len(b), err, size)
	}
}

// At a steady rate of hotRate events a second or more a batch waits up
// to its steady linger for more, however few came during the last write;
// under it, a batch of one event goes at once.
func TestCollectorLingersAtSteadyRate(t *testing.T) {
	t.Parallel()
	const size = 50
	c, send := sendingCollector(size)
	c.linger, c.rateLinger = time.Hour, time.Hour // a linger would hang the batches that must go at once
	clock := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return clock }
	ctx := context.Background()
	one := func(what string) {
		t.Helper()
		send(1)
		if b, _, err := c.collect(ctx, time.Time{}); err != nil || len(b) != 1 {
			t.Fatalf("%s: %d events, %v; want 1 at once", what, len(b), err)
		}
	}

	// One event a millisecond (1,000 a second) for two windows: each
	// batch goes at once.
	for range 2 * int(rateWindow/time.Millisecond) {
		clock = clock.Add(time.Millisecond)
		one("at 1,000 events a second")
	}
	// Twice hotRate a second until a window ends: the batches after it
	// wait.
	per := int(2 * hotRate * rateWindow.Seconds())
	for i := 0; ; i++ {
		if i > 2*per {
			t.Fatalf("%d events at twice hotRate a second: still not steady", i)
		}
		clock = clock.Add(rateWindow / time.Duration(per))
		if c.measure(); c.steady {
			break
		}
		one("until the window ends")
	}
	// The batch waits (here until it is full) for what comes later.
	send(1)
	go func() {
		time.Sleep(10 * time.Millisecond)
		send(size - 1)
	}()
	if b, _, err := c.collect(ctx, time.Time{}); err != nil || len(b) != size {
		t.Fatalf("at a steady rate: %d events, %v; want %d (the later ones with the first)", len(b), err, size)
	}
	// A window at a lower rate ends the lingering.
	clock = clock.Add(2 * rateWindow)
	one("after a quiet window")
	one("after the rate fell")
}
