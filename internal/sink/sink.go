package sink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/backoff"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Sink batches events and writes them through its publisher, one write in
// flight, then acknowledges them in the tracker. It lives as long as Run;
// its publisher's session as long as a relay session (see Open).
type Sink struct {
	cfg Config
	m   *relaymetrics.Metrics
	// pub is the broker's publisher (pubErr why there is none); open is
	// set while it has a session.
	pub    publish.Publisher
	pubErr error
	open   bool
	// Guard, when set, is asked before every write, and by the
	// publisher's connections before every socket write; an error refuses
	// the write (see Liveness in the package doc).
	Guard func() error
	// WriteBy, when set with Guard, is the latest moment a socket write
	// may start (publish.Session.WriteBy).
	WriteBy func() time.Time
	// Recorded, when set, waits until the slot's state row records pos
	// (its ceiling covers it), or ctx ends; an exactly-once commit
	// calls it with the progress it is about to commit (see
	// exactlyonce.go). Nil: progress is trusted without it.
	Recorded func(ctx context.Context, pos pglogrepl.LSN) error
	// unavailable holds the topics whose writes fail as
	// topicUnavailable, since when and why; a write to the topic that
	// succeeds removes it.
	unavailable map[string]unavailableTopic
	// recs is write's slice of records, kept between writes; states and
	// order are Publish's, kept between batches.
	recs   []*publish.Record
	outs   []publish.Outcome
	states []recordState
	order  []int
	// eos is the exactly-once state, nil in at-least-once mode.
	eos *eosState
}

// unavailableTopic is a topic whose writes fail as topicUnavailable.
type unavailableTopic struct {
	since  time.Time // the first failure of this spell
	last   time.Time // the latest failure
	reason string    // the topic_unavailable label: unknown-topic or not-authorized
	// expired is set once the spell outlasted TopicUnavailableGrace and
	// its records are dead-lettered: the gauge is gone (nothing waits).
	expired bool
}

// maxUnavailableTopics bounds the sink's unavailable map (and so the
// topic_unavailable series): a row can name any number of topics that do
// not exist. When full, the entry whose last failure is oldest goes.
const maxUnavailableTopics = 1024

// NewSink returns a sink writing with c's settings through the publisher
// c names, and counting in m; Open (or OpenExactlyOnce) opens its session.
// A publisher that cannot be made fails Open.
func NewSink(c Config, m *relaymetrics.Metrics) *Sink {
	m.PublishedTo(c.DeadLetters.Topic) // a series of its own, whatever the topics rows name
	s := &Sink{cfg: c, m: m, unavailable: make(map[string]unavailableTopic)}
	s.pub, s.pubErr = newPublisher(&c, m)
	return s
}

// newPublisher makes the publisher c names, counting in m (when set).
func newPublisher(c *Config, m *relaymetrics.Metrics) (publish.Publisher, error) {
	p, err := publish.New(c.Publisher, publish.Config{Slot: c.Slot, Settings: c.Settings, Metrics: m, Logger: c.Logger})
	if err != nil {
		return nil, relayerr.Permanent(err)
	}
	return p, nil
}

// Open opens the publisher's session for a relay session. A session is
// closed when its sink stops (Close): records the publisher still retries
// must not reach the broker after the session, whose successor replays
// them in order.
func (s *Sink) Open(ctx context.Context) error { return s.openWith(ctx, publish.Session{}) }

// OpenSlot is Open for a relay session of the slot whose WAL history
// writer names (WriterKey): the publisher's session carries it
// (publish.Session.Slot), so a broker that deduplicates per writer drops
// what a replay of the slot writes again.
func (s *Sink) OpenSlot(ctx context.Context, writer string) error {
	return s.openWith(ctx, publish.Session{Slot: writer})
}

// OpenFenced is Open for fenced at-least-once writes: the session's writes
// are fenced under key, which the slot's relays share (ProgressKey), and
// opening fences the older relays of the slot and aborts what they left
// open (publish.Session.Fence). A newer relay's fencing ends the session
// with relaytype.ErrFenced. writer is OpenSlot's.
func (s *Sink) OpenFenced(ctx context.Context, key, writer string) error {
	err := s.openWith(ctx, publish.Session{Fence: key, Slot: writer})
	if errors.Is(err, publish.ErrFenced) {
		return fmt.Errorf("%w: %w", relaytype.ErrFenced, err)
	}
	return err
}

// openWith opens a session of s's kind (exactly-once under s.Identity
// when set), with the sink's guard.
func (s *Sink) openWith(ctx context.Context, ss publish.Session) error {
	s.Close()
	if s.pubErr != nil {
		return s.pubErr
	}
	ss.Guard, ss.WriteBy = s.Guard, s.WriteBy
	if err := s.pub.Open(ctx, ss); err != nil {
		return err
	}
	s.open = true
	return nil
}

// Close ends the publisher's session, aborting an open exactly-once
// transaction, once every record's outcome is known.
func (s *Sink) Close() {
	if s.eos != nil {
		s.eos.open, s.eos.acks = false, s.eos.acks[:0]
	}
	if s.pub != nil {
		s.pub.Close() // also what a failed Open left
	}
	s.open = false
}

// mode is one half of the sink: how a batch goes to the broker and
// when its events are acknowledged. atLeastOnce writes each batch with the
// idempotent producer and acknowledges it when Kafka did; transactional
// writes it into a Kafka transaction and acknowledges what a commit made
// visible (see exactlyonce.go).
type mode interface {
	// publish writes batch; it returns only when the batch is in the
	// broker's hands, on ctx's end or on an error that ends the session.
	publish(ctx context.Context, batch []decode.Event) error
	// ack records in tr what the last publish (or flush) made safe to
	// confirm.
	ack(batch []decode.Event, tr *acktrack.Tracker)
	// due is when what the publisher holds is to be flushed though no
	// batch came; zero when never.
	due() time.Time
	// flush makes what the publisher holds safe to acknowledge, once due.
	flush(ctx context.Context) error
}

// atLeastOnce is the at-least-once publisher: Publish, then every event
// of the batch is acknowledged.
type atLeastOnce struct{ *Sink }

func (p atLeastOnce) publish(ctx context.Context, batch []decode.Event) error {
	return p.Publish(ctx, batch)
}

func (p atLeastOnce) ack(batch []decode.Event, tr *acktrack.Tracker) { p.acknowledge(batch, tr) }

// due is never: each publish leaves nothing held.
func (atLeastOnce) due() time.Time { return time.Time{} }

func (atLeastOnce) flush(context.Context) error { return nil }

// mode is the session's half: transactional once OpenExactlyOnce ran,
// at-least-once otherwise.
func (s *Sink) mode() mode {
	if s.eos != nil {
		return transactional{s}
	}
	return atLeastOnce{s}
}

// Run publishes the events of q in batches until q is closed (it returns
// nil) or ctx ends (it returns ctx.Err()): it collects a batch, publishes
// it, recycles its records' memory and gives their cost back to q's
// budget (the records are in Kafka's hands) and acknowledges what the
// publisher made safe. A batch is sent as soon as the sink is free
// (after BatchTimeout, when set; without one, after up to steadyLinger
// at a steady rate of hotRate events a second, or after up to hotLinger
// when hotEvents were queued during the last write): what is queued while a
// write is in flight goes in the next one. Kafka errors are retried; only a
// permanent one ends Run early. While no batch comes,
// what the publisher holds is flushed when it is due (an exactly-once
// transaction open for half the transaction timeout is committed).
func (s *Sink) Run(ctx context.Context, q *queue.Queue, tr *acktrack.Tracker) error {
	pub := s.mode()
	hooks := hookcall.FromContext(ctx)
	col := newCollector(q, s.cfg.BatchSize, s.cfg.BatchTimeout)
	defer col.stop()
	for {
		batch, closed, err := col.collect(ctx, pub.due())
		switch {
		case errors.Is(err, errDue):
			if err := pub.flush(ctx); err != nil {
				return err
			}
			pub.ack(nil, tr)
			continue
		case err != nil || batch == nil:
			return err
		}
		hooks.BatchRead(len(batch))
		if err := pub.publish(ctx, batch); err != nil {
			return err
		}
		// The publisher holds nothing of the batch's records any more:
		// their memory goes back to the decoder's pools, before the
		// reader, woken by the room given back, decodes more.
		decode.Recycle(batch)
		q.Budget.Give(batchCost(batch))
		pub.ack(batch, tr)
		if closed {
			return nil
		}
	}
}

// collector gathers the sink's batches from the queue. Each receive is a
// slice of events (see wal.Stream), whose room it gives back once it holds
// them in a batch, and which it empties and hands back on q.Free.
type collector struct {
	q       *queue.Queue
	size    int
	timeout time.Duration
	// linger is hotLinger, rateLinger is steadyLinger (a test may set
	// others).
	linger, rateLinger time.Duration
	// now is time.Now (a test may set another clock).
	now func() time.Time
	// The events returned since windowStart, and whether the last full
	// rateWindow counted hotRate or more a second.
	windowStart  time.Time
	windowEvents int
	steady       bool
	timer        *time.Timer
	// dueTimer ends a wait for a batch at the publisher's due time.
	dueTimer *time.Timer
	batch    []decode.Event
	// next was received, but over size with the batch before.
	next []decode.Event
}

func newCollector(q *queue.Queue, size int, timeout time.Duration) *collector {
	c := &collector{q: q, size: size, timeout: timeout, linger: hotLinger, rateLinger: steadyLinger, now: time.Now,
		timer: time.NewTimer(time.Hour), dueTimer: time.NewTimer(time.Hour), batch: make([]decode.Event, 0, size)}
	c.stop()
	return c
}

// stop stops the collector's timers.
func (c *collector) stop() {
	c.timer.Stop()
	c.dueTimer.Stop()
}

// hotLinger is how long a batch waits for more events, once the queue is
// empty, when the sink has no batch timeout and events came while its
// last write was in flight. At a steady high rate of small transactions
// (5,000 a second, each write carrying two or three records) sending at
// once made a produce request per write of a few records and kept the
// relay, the broker and the consumer busy enough on two cores to stall
// the pipeline for tens of milliseconds; waiting this long makes
// batches of several records at a cost below the write's own round trip.
// At a low rate the queue is empty when a write ends, and a batch goes at
// once.
const hotLinger = 500 * time.Microsecond

// hotEvents is how many events must have been queued during the last
// write for a batch to linger: at 1,000 transactions a second a write of
// half a millisecond finds one or none.
const hotEvents = 3

// A steady rate of hotRate events a second or more, counted over
// rateWindow, has every batch wait up to steadyLinger for more, from its
// first event, however few came during the last write. At 4,000
// single-row transactions a second a write of a third of a millisecond
// finds one or two queued, too few for hotLinger: each write carried one
// or two records, and on two cores the produce requests of the relay,
// the broker and the consumer kept enough runnable tasks (seven) to
// stall the pipeline for tens of milliseconds in some runs (p99 commit →
// consumer 2.7–33 ms in five runs against 5.4–7.9 ms for a peer batching
// every millisecond). Waiting a millisecond there made batches of
// several records (p99 2.8–3.1 ms in three runs, the peer 5.4–6.1). At
// 1,000 a second the rate stays under hotRate, and a batch goes at once.
const (
	hotRate      = 2000
	rateWindow   = 100 * time.Millisecond
	steadyLinger = time.Millisecond
)

// broker names the sink's broker in log lines: the publisher's name.
func (s *Sink) broker() string { return cmp.Or(s.cfg.Publisher, publish.Default) }

// errDue ends a collect whose due time passed before a batch came.
var errDue = errors.New("relay: sink: due before a batch came")

// add moves evs into the batch and hands the slice back, unless it is
// large (a large transaction's: the reader's next ones are likely small,
// and the free slices should not hold much memory).
func (c *collector) add(evs []decode.Event) {
	c.batch = append(c.batch, evs...)
	c.q.Room.Release(int64(len(evs)))
	if cap(evs) > queue.MaxFreeCap {
		return
	}
	clear(evs)
	select {
	case c.q.Free <- evs[:0]:
	default:
	}
}

// collect waits for events and returns the next batch: what is queued,
// up to size events, and, with a timeout, what comes within it once the
// queue is empty. closed reports that the queue was closed after the
// batch; a nil batch, that it was closed before any event. When due is
// set and passes before an event comes, it returns errDue. The batch is
// valid until the next call.
func (c *collector) collect(ctx context.Context, due time.Time) (batch []decode.Event, closed bool, err error) {
	c.measure()
	batch, closed, err = c.gather(ctx, due)
	c.windowEvents += len(batch)
	return batch, closed, err
}

// measure ends the rate window once it is rateWindow long, and tells
// from it whether the rate is steady (hotRate events a second or more).
func (c *collector) measure() {
	now := c.now()
	el := now.Sub(c.windowStart)
	if el < rateWindow {
		return
	}
	c.steady = float64(c.windowEvents) >= hotRate*el.Seconds()
	c.windowStart, c.windowEvents = now, 0
}

// gather is collect but for the rate's measure.
func (c *collector) gather(ctx context.Context, due time.Time) (batch []decode.Event, closed bool, err error) {
	clear(c.batch)
	c.batch = c.batch[:0]
	// Events that came while the last write was in flight (hotEvents of
	// them at least) mean a steady stream: then, without a timeout of its
	// own, the batch waits up to hotLinger for more once the queue is
	// empty.
	hot := c.next != nil
	if !hot {
		select {
		case evs, ok := <-c.q.Events:
			if !ok {
				return nil, true, nil
			}
			c.next, hot = evs, true
		default:
		}
	}
	if c.next == nil {
		var expired <-chan time.Time // nil: no due time
		if !due.IsZero() {
			c.dueTimer.Reset(time.Until(due))
			defer c.dueTimer.Stop()
			expired = c.dueTimer.C
		}
		select {
		case evs, ok := <-c.q.Events:
			if !ok {
				return nil, true, nil
			}
			c.next = evs
		case <-expired:
			return nil, false, errDue
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	c.add(c.next)
	c.next = nil
	timeout, lingering := c.timeout, false
	switch {
	case timeout > 0:
	case c.steady:
		timeout = c.rateLinger
	case hot:
		timeout, lingering = c.linger, true
	}
	waited := timeout <= 0
	if !waited {
		c.timer.Reset(timeout)
	}
	defer c.timer.Stop()
	for len(c.batch) < c.size {
		// What is queued goes first; the timer only decides how long to
		// wait for more once the queue is empty.
		var (
			evs []decode.Event
			ok  bool
		)
		select {
		case evs, ok = <-c.q.Events:
		default:
			// A linger needs hotEvents queued during the write: one or two
			// come at any rate now and then.
			if waited || (lingering && len(c.batch) < hotEvents) {
				return c.batch, false, nil
			}
			lingering = false
			select {
			case evs, ok = <-c.q.Events:
			case <-c.timer.C:
				waited = true
				continue
			}
		}
		if !ok {
			return c.batch, true, nil
		}
		if len(c.batch)+len(evs) > c.size {
			c.next = evs
			break
		}
		c.add(evs)
	}
	return c.batch, false, nil
}

// batchCost is what batch took from the buffer budget.
func batchCost(batch []decode.Event) int64 {
	var n int64
	for i := range batch {
		n += batch[i].Cost
	}
	return n
}

// acknowledge records batch as acknowledged, per transaction.
func (s *Sink) acknowledge(batch []decode.Event, tr *acktrack.Tracker) {
	now := time.Now()
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && batch[j].Tx == batch[i].Tx {
			s.m.CommitToAck.Observe(now.Sub(batch[j].Commit).Seconds())
			j++
		}
		tr.Ack(batch[i].Tx, j-i)
		i = j
	}
	s.m.InFlight.Set(float64(tr.InFlight()))
}

// Bounds for relayerr.OwnFaultUnlessTransient errors.
const (
	rejectAttempts = 5
	rejectAfter    = 5 * time.Second
)

// recordState is what Publish knows about one record of a batch.
type recordState struct {
	done    bool      // acknowledged by Kafka, and not to be sent again
	alone   bool      // write it in a call of its own: a call holding it failed for some record's fault
	rejects int       // failed single writes with a relayerr.OwnFaultUnlessTransient error
	since   time.Time // the first of them
}

// Publish writes batch until Kafka acknowledged every record, retrying
// failed records with backoff. It returns only on success, ctx end or a
// permanent error.
//
// Order: the producer keeps each partition's order across its own
// retries and leader moves (the idempotent producer), and gives up on a
// record only for a reason of its own (too large, its topic unavailable).
// Records are written in batch order, a call at a time. After a call in
// which a record failed, the attempt ends; the next one starts at the
// first record not written. So per key, nothing after a failed record is
// written before it; should a later record of a failed record's key have
// been written anyway (in the same call), it is written again after it,
// so the last copies keep commit order.
//
// A record the broker will never accept (relayerr.OwnFault, or
// OwnFaultUnlessTransient for too long) is dead-lettered in place, or
// stops the relay under InvalidStop. A record batch of several records
// failing that way may be any one's fault: those records are then written
// one by one.
func (s *Sink) Publish(ctx context.Context, batch []decode.Event) error {
	s.m.BatchSize.Observe(float64(len(batch)))
	if cap(s.states) < len(batch) {
		s.states = make([]recordState, len(batch))
	}
	st := s.states[:len(batch)]
	clear(st)
	wait := backoff.New(s.cfg.RetryBackoff, s.cfg.MaxRetryBackoff)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		pending, retryErr, err := s.attempt(ctx, batch, st)
		switch {
		case err != nil:
			return err
		case pending == 0:
			return nil
		case retryErr == nil:
			// Progress without a failure to wait out: records to write
			// alone, or dead-lettered in place.
			continue
		}
		d := wait.Next()
		s.cfg.Logger.Warn("write failed; retrying", "sink", s.broker(), "attempt", attempt, "records", pending, "backoff", d, "error", retryErr)
		if !backoff.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

// group is the unit of ordering: records of one topic and key.
type group struct{ topic, key string }

// attempt writes the records of batch not yet done, in order, in as few
// calls as their alone flags allow, up to and including the first call in
// which a record fails. It returns how many records are left, the error
// to wait out before the next attempt (nil when the next one may start at
// once), or an error that ends Publish.
func (s *Sink) attempt(ctx context.Context, batch []decode.Event, st []recordState) (pending int, retryErr error, err error) {
	order := notDone(s.order[:0], st)
	s.order = order
	failed := make(map[group]int) // first failed record of each group
	written := 0                  // order[:written] went out, in calls
calls:
	for written < len(order) {
		call := nextCall(st, order[written:])
		written += len(call)
		out, callErr := s.write(ctx, batch, call)
		if callErr != nil {
			// Nothing of the call is known to be in Kafka.
			if ctx.Err() != nil {
				return 0, nil, ctx.Err()
			}
			if relayerr.IsPermanent(callErr) || errors.Is(callErr, relaytype.ErrFenced) {
				return 0, nil, callErr
			}
			retryErr = callErr
			for _, i := range call {
				noteFailure(failed, batch, i)
			}
			break calls
		}
		var stop bool
		if stop, retryErr, err = s.recordsFailed(batch, st, call, out, failed); err != nil {
			return 0, nil, err
		}
		if stop {
			// No later call of this attempt: it could write a record
			// of a failed record's key before that record.
			break calls
		}
	}
	rewriteAfterFailures(batch, st, order[:written], failed)
	for i := range st {
		if !st[i].done {
			pending++
		}
	}
	return pending, retryErr, nil
}

// notDone appends the records not done to order, in batch order.
func notDone(order []int, st []recordState) []int {
	for i := range st {
		if !st[i].done {
			order = append(order, i)
		}
	}
	return order
}

// nextCall is the records of the next call: the first of order, alone if
// it must be, else with the following records not alone.
func nextCall(st []recordState, order []int) []int {
	j := 1
	if !st[order[0]].alone {
		for j < len(order) && !st[order[j]].alone {
			j++
		}
	}
	return order[:j]
}

// recordsFailed records the outcome of a call, out being each record's
// outcome: a record confirmed is done; a failed one is noted in failed
// and handled by its error's verdict. It reports whether a record failed
// (the attempt then ends after this call), the error to wait out before
// the next attempt (nil when it may start at once), or an error that ends
// Publish.
func (s *Sink) recordsFailed(batch []decode.Event, st []recordState, call []int, out []publish.Outcome, failed map[group]int) (stop bool, retryErr, err error) {
	for n, i := range call {
		o := out[n]
		if o.Verdict == publish.Confirmed {
			st[i].done = true
			continue
		}
		stop = true
		noteFailure(failed, batch, i)
		e, v := o.Err, o.Verdict
		switch {
		case v == publish.Fatal || v == publish.Fenced:
			return stop, nil, relayerr.Permanent(fmt.Errorf("%w: %w", relaytype.ErrKafkaAuth, e))
		case v == publish.Retry:
			retryErr = e
			continue
		case v == publish.TopicUnavailable:
			expired, err := s.topicUnavailable(&batch[i], o)
			if err != nil {
				return stop, nil, err
			}
			if !expired {
				retryErr = e
				continue
			}
			if len(call) > 1 {
				st[i].alone = true
				continue
			}
		case len(call) > 1:
			st[i].alone = true
			continue
		case v == publish.RefusedUnlessTransient:
			if st[i].rejects == 0 {
				st[i].since = time.Now()
			}
			st[i].rejects++
			if st[i].rejects < rejectAttempts || time.Since(st[i].since) < rejectAfter {
				retryErr = e
				continue
			}
		}
		if err := s.reject(&batch[i], &st[i], o); err != nil {
			return stop, nil, err
		}
	}
	return stop, retryErr, nil
}

// noteFailure records that record i of batch failed, unless an earlier
// record of its group did.
func noteFailure(failed map[group]int, batch []decode.Event, i int) {
	g := group{batch[i].Record.Topic, string(batch[i].Record.Key)}
	if _, ok := failed[g]; !ok {
		failed[g] = i
	}
}

// rewriteAfterFailures marks the records of written (those the attempt
// sent, in batch order) that follow a failed record of their group as not
// done: they go again, after it.
func rewriteAfterFailures(batch []decode.Event, st []recordState, written []int, failed map[group]int) {
	if len(failed) == 0 {
		return
	}
	for _, i := range written {
		if f, ok := failed[group{batch[i].Record.Topic, string(batch[i].Record.Key)}]; ok && i > f {
			st[i].done = false
		}
	}
}

// topicUnavailable records that a write of ev failed with o, a
// TopicUnavailable outcome, and reports whether ev's topic has been failing
// for longer than TopicUnavailableGrace: ev is then to be dead-lettered
// (reason topic-unavailable). It returns a permanent error instead when
// OnUnavailableTopic is UnavailableStop, or when ev is a dead-letter record
// (the dead-letter topic is unavailable: nothing can be dead-lettered). A
// spell ends when a write to the topic succeeds, or when its last failure
// is older than twice the grace period, and a minute (the next failure
// starts a new one).
func (s *Sink) topicUnavailable(ev *decode.Event, o publish.Outcome) (expired bool, err error) {
	topic, e := ev.Record.Topic, o.Err
	reason := o.Reason
	if reason == "" {
		reason = publish.ReasonUnknownTopic
	}
	now := time.Now()
	u, ok := s.unavailable[topic]
	// A write fails only after the producer's own retries (seconds), so a
	// spell ends after a quiet time well above that.
	if ok && now.Sub(u.last) > max(2*s.cfg.TopicUnavailableGrace, time.Minute) {
		s.forgetUnavailable(topic)
		ok = false
	}
	if !ok || u.reason != reason {
		if ok {
			s.m.TopicUnavailable.DeleteLabelValues(topic, u.reason)
		} else {
			s.makeRoomUnavailable()
			u = unavailableTopic{since: now}
		}
		u.reason, u.expired = reason, false
		s.m.TopicUnavailable.WithLabelValues(topic, reason).Set(1)
		policy := "dead-letter" // the values of relay.UnavailablePolicy
		if s.cfg.StopOnUnavailable {
			policy = "stop"
		}
		s.cfg.Logger.Warn("topic unavailable; retrying, then dead-lettering its events (or stopping) if it lasts", "sink", s.broker(),
			"topic", topic, "reason", reason, "grace", s.cfg.TopicUnavailableGrace, "on_unavailable_topic", policy, "error", e)
	}
	u.last = now
	s.unavailable[topic] = u
	d := now.Sub(u.since)
	if d <= s.cfg.TopicUnavailableGrace {
		return false, nil
	}
	if s.cfg.StopOnUnavailable || ev.Invalid != nil {
		return false, relayerr.Permanent(fmt.Errorf("%w: writes to topic %s failed for %v (topic unavailable grace %v; waiting: message %s): %w",
			relaytype.ErrTopicUnavailable, topic, d.Round(time.Second), s.cfg.TopicUnavailableGrace, ev.MessageID(), e))
	}
	if !u.expired {
		u.expired = true
		s.unavailable[topic] = u
		s.m.TopicUnavailable.DeleteLabelValues(topic, u.reason)
		s.cfg.Logger.Warn("topic unavailable past the grace period; dead-lettering its events (reason topic-unavailable)", "sink", s.broker(),
			"topic", topic, "reason", reason, "for", d.Round(time.Second))
	}
	return true, nil
}

// forgetUnavailable ends topic's spell of unavailability.
func (s *Sink) forgetUnavailable(topic string) {
	if u, ok := s.unavailable[topic]; ok {
		delete(s.unavailable, topic)
		if !u.expired {
			s.m.TopicUnavailable.DeleteLabelValues(topic, u.reason)
		}
	}
}

// makeRoomUnavailable keeps the unavailable map under
// maxUnavailableTopics: when full, the topic whose last failure is oldest
// is forgotten.
func (s *Sink) makeRoomUnavailable() {
	if len(s.unavailable) < maxUnavailableTopics {
		return
	}
	var oldest string
	var at time.Time
	for topic, u := range s.unavailable {
		if oldest == "" || u.last.Before(at) {
			oldest, at = topic, u.last
		}
	}
	s.forgetUnavailable(oldest)
}

// reject handles a record the broker will never accept, with outcome o: a
// normal record is dead-lettered in place (or, under InvalidStop, stops
// the relay); a dead-letter record becomes the minimal one, and only the
// minimal one refused stops the relay.
func (s *Sink) reject(ev *decode.Event, st *recordState, o publish.Outcome) error {
	*st = recordState{alone: true}
	e := o.Err
	if ev.Invalid != nil { // a dead-letter record
		if !ev.Minimal {
			s.cfg.Logger.Warn("the broker rejected a dead-letter record; sending the minimal one (message ID, reason, detail, original topic)", "sink", s.broker(),
				"message_id", ev.Invalid.MessageID.String(), "error", e)
			decode.MinimalDeadLetter(ev, "kafka rejected the dead-letter record ("+e.Error()+")")
			return nil
		}
		return relayerr.Permanent(fmt.Errorf("%w: the dead-letter topic %s refused even the minimal record (message ID, reason, detail) of message %s (reason %s), so the row cannot be dead-lettered: %w",
			relaytype.ErrDeadLetter, ev.Record.Topic, ev.Invalid.MessageID, ev.Invalid.Reason, e))
	}
	inv := &relaytype.InvalidEventError{MessageID: ev.ID, Reason: relaytype.ReasonKafkaRejected, Detail: "kafka rejected the record: " + e.Error()}
	switch {
	case o.Reason == publish.ReasonTooLarge:
		inv.Reason, inv.Detail = relaytype.ReasonTooLarge, "the broker rejected the record as too large: "+e.Error()
	case o.Verdict == publish.TopicUnavailable:
		inv.Reason, inv.Detail = relaytype.ReasonTopicUnavailable, fmt.Sprintf("writes to topic %s failed for longer than the topic unavailable grace (%v): %v",
			ev.Record.Topic, s.cfg.TopicUnavailableGrace, e)
	}
	if s.cfg.StopOnInvalid {
		s.m.Invalid.WithLabelValues(inv.Reason).Inc()
		return relayerr.Permanent(inv)
	}
	ev.Invalid = inv
	s.cfg.DeadLetters.Shape(ev)
	return nil
}

// write sends the records call of batch in one publisher write. It
// returns each record's outcome, or an error of the whole call when its
// outcome is unknown (the liveness guard refused, or ctx ended).
func (s *Sink) write(ctx context.Context, batch []decode.Event, call []int) ([]publish.Outcome, error) {
	if s.Guard != nil {
		if err := s.Guard(); err != nil {
			return nil, err
		}
	}
	if !s.open { // a backfill's sink: opened at its first write
		if err := s.Open(ctx); err != nil {
			return nil, err
		}
	}
	recs := s.recs[:0]
	for _, i := range call {
		recs = append(recs, &batch[i].Record)
	}
	defer func() { clear(recs); s.recs = recs[:0] }()
	if cap(s.outs) < len(recs) {
		s.outs = make([]publish.Outcome, len(recs))
	}
	out := s.outs[:len(recs)] // valid until the next write
	start := time.Now()
	err := s.pub.Write(ctx, recs, out)
	end := time.Now()
	s.m.PublishDuration.Observe(end.Sub(start).Seconds())
	failed := err
	if err == nil {
		failed = firstFailure(out)
	}
	var outs []publish.Outcome // none when the call's outcome is unknown
	if err == nil {
		outs = out
	}
	hookcall.FromContext(ctx).Written(batch, call, outs, start, end, failed, false)
	if failed != nil {
		s.m.PublishErrors.Inc()
	}
	if errors.Is(err, publish.ErrFenced) {
		return nil, fmt.Errorf("%w: write: %w", relaytype.ErrFenced, err)
	}
	if err != nil {
		return nil, err
	}
	s.countPublished(recs, out)
	return out, nil
}

// firstFailure is the error of the first record of out not confirmed, nil
// when all are.
func firstFailure(out []publish.Outcome) error {
	for _, o := range out {
		if o.Verdict != publish.Confirmed {
			return o.Err
		}
	}
	return nil
}

// countPublished counts the records of recs that the broker confirmed.
func (s *Sink) countPublished(recs []*publish.Record, out []publish.Outcome) {
	var topic string
	n := 0
	flush := func() {
		if n > 0 {
			s.m.PublishedTo(topic).Add(float64(n))
		}
	}
	for k, r := range recs {
		if out[k].Verdict != publish.Confirmed {
			continue
		}
		if r.Topic != topic {
			flush()
			topic, n = r.Topic, 0
			if u, ok := s.unavailable[topic]; ok {
				s.forgetUnavailable(topic)
				s.cfg.Logger.Info("topic available again", "topic", topic, "after", time.Since(u.since).Round(time.Millisecond))
			}
		}
		n++
	}
	flush()
}
