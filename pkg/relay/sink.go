package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"golang.org/x/sync/semaphore"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
)

// sink batches events and writes them to Kafka, one write in flight, then
// acknowledges them in the tracker.
type sink struct {
	cfg       *Config
	m         *metrics
	prod      *producer
	transport *kafka.Transport
	limits    *topicLimits
	// guard, when set, is asked before every Kafka write; an error
	// refuses the write (see Liveness in the package doc).
	guard func() error
	// unavailable holds the topics whose writes fail as
	// topicUnavailable, since when and why; a write to the topic that
	// succeeds removes it.
	unavailable map[string]unavailableTopic
	// msgs is write's slice of records, kept between writes.
	msgs []kafka.Message
}

// unavailableTopic is a topic whose writes fail as topicUnavailable.
type unavailableTopic struct {
	since  time.Time
	reason string // the topic_unavailable label: unknown-topic or not-authorized
}

func newSink(c *Config, m *metrics) *sink {
	transport := &kafka.Transport{TLS: c.TLS, SASL: c.SASL, ClientID: kafkaClientID}
	return &sink{
		cfg: c, m: m, transport: transport, limits: newTopicLimits(c, transport), unavailable: make(map[string]unavailableTopic),
		prod: newProducer(c, transport),
	}
}

// close closes the sink's Kafka connections.
func (s *sink) close() {
	s.prod.close()
	s.transport.CloseIdleConnections()
}

// kafkaClientID is the client ID of the relay's Kafka requests.
const kafkaClientID = "pgoutbox-relay"

// The sink hands emptied event slices back to the reader for reuse: at most
// freeSlices of them, of at most maxFreeCap events each.
const (
	freeSlices = 64
	maxFreeCap = 256 // events
)

// run publishes the events of ch in batches until ch is closed (it returns
// nil) or ctx ends (it returns ctx.Err()), giving each acknowledged batch's
// cost back to buf. Each receive from ch is a slice of events (see
// stream.staged), whose room it gives back once it holds them in a batch,
// and which it empties and hands back on free. A batch is sent as soon
// as the sink is free (after BatchTimeout, when set): what is queued while
// a write is in flight goes in the next one. Kafka errors are retried; only
// a permanent one ends run early.
func (s *sink) run(ctx context.Context, ch <-chan []event, room *semaphore.Weighted, free chan<- []event, buf *budget, tr *acktrack.Tracker) error {
	batch := make([]event, 0, s.cfg.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// add moves evs into batch and hands the slice back, unless it is
	// large (a large transaction's: the reader's next ones are likely
	// small, and the free slices should not hold much memory).
	add := func(evs []event) {
		batch = append(batch, evs...)
		room.Release(int64(len(evs)))
		if cap(evs) > maxFreeCap {
			return
		}
		clear(evs)
		select {
		case free <- evs[:0]:
		default:
		}
	}
	var next []event // received, but over BatchSize with the batch before
	for {
		clear(batch)
		batch = batch[:0]
		if next == nil {
			select {
			case evs, ok := <-ch:
				if !ok {
					return nil
				}
				next = evs
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		add(next)
		next = nil
		closed := false
		waited := s.cfg.BatchTimeout <= 0
		if !waited {
			timer.Reset(s.cfg.BatchTimeout)
		}
	fill:
		for len(batch) < s.cfg.BatchSize {
			// What is queued goes first; the timer only decides how long
			// to wait for more once the queue is empty.
			var (
				evs []event
				ok  bool
			)
			select {
			case evs, ok = <-ch:
			default:
				if waited {
					break fill
				}
				select {
				case evs, ok = <-ch:
				case <-timer.C:
					waited = true
					continue
				}
			}
			if !ok {
				closed = true
				break
			}
			if len(batch)+len(evs) > s.cfg.BatchSize {
				next = evs
				break
			}
			add(evs)
		}
		timer.Stop()
		if err := s.publish(ctx, batch); err != nil {
			return err
		}
		s.acknowledge(batch, tr, buf)
		if closed {
			return nil
		}
	}
}

// acknowledge records batch as acknowledged, per transaction, and gives its
// cost back to buf.
func (s *sink) acknowledge(batch []event, tr *acktrack.Tracker, buf *budget) {
	now := time.Now()
	var cost int64
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && batch[j].tx == batch[i].tx {
			s.m.commitToAck.Observe(now.Sub(batch[j].commit).Seconds())
			cost += batch[j].cost
			j++
		}
		tr.Ack(batch[i].tx, j-i)
		i = j
	}
	s.m.inFlight.Set(float64(tr.InFlight()))
	buf.give(cost)
}

// Kafka errors, by what the sink does about them.
type verdict int

const (
	// retryable: the broker or the network; retry with backoff, forever.
	retryable verdict = iota
	// ownFaultUnlessTransient: most likely the record's own fault (its
	// topic does not exist), but it may pass; dead-letter it when it
	// persists for rejectAttempts attempts and rejectAfter.
	ownFaultUnlessTransient
	// ownFault: the broker will never accept the record; dead-letter it.
	ownFault
	// topicUnavailable: the record's topic does not exist or the relay
	// may not write it: the operator's to fix (a topic provisioned late,
	// a missing ACL). Retry with backoff for TopicUnavailableGrace, then
	// stop; never dead-letter.
	topicUnavailable
	// fatal: the relay's credentials or rights; stop.
	fatal
)

// Bounds for ownFaultUnlessTransient errors.
const (
	rejectAttempts = 5
	rejectAfter    = 5 * time.Second
)

// classify says what err, the failure of a write, calls for.
func classify(err error) verdict {
	var kerr kafka.Error
	if !errors.As(err, &kerr) {
		return retryable
	}
	switch kerr {
	case kafka.SASLAuthenticationFailed, kafka.ClusterAuthorizationFailed, kafka.UnsupportedSASLMechanism,
		kafka.IllegalSASLState, kafka.TransactionalIDAuthorizationFailed:
		return fatal
	case kafka.UnknownTopicOrPartition, kafka.TopicAuthorizationFailed:
		return topicUnavailable
	case kafka.InvalidMessage:
		return ownFaultUnlessTransient
	case kafka.MessageSizeTooLarge, kafka.RecordListTooLarge, kafka.InvalidTopic, kafka.InvalidTimestamp,
		kafka.UnsupportedForMessageFormat, kafka.PolicyViolation, kafka.InvalidRecord:
		return ownFault
	}
	return retryable
}

// recordState is what publish knows about one record of a batch.
type recordState struct {
	done    bool      // acknowledged by Kafka, and not to be sent again
	alone   bool      // write it in a call of its own: a call holding it failed for some record's fault
	rejects int       // failed single writes with an ownFaultUnlessTransient error
	since   time.Time // the first of them
}

// publish writes batch until Kafka acknowledged every record, retrying
// failed records with backoff. It returns only on success, ctx end or a
// permanent error.
//
// Order: records are written in batch order, one call at a time, and a
// call holds at most one record batch per partition (its share, sized to
// the broker's limit by callShares), which the broker takes or refuses
// whole. After a call in which a record failed, the attempt ends; the next
// one starts at the first record not written. So per key, nothing after a
// failed record is written before it, and every copy in Kafka is in commit
// order. (Should a later record of a failed record's key have been written
// anyway, it is written again after it, so the last copies keep commit
// order.)
//
// A record the broker will never accept (ownFault, or
// ownFaultUnlessTransient for too long) is dead-lettered in place, or
// stops the relay under InvalidStop. A call of several records failing
// that way may be any one's fault: those records are then written one by
// one.
func (s *sink) publish(ctx context.Context, batch []event) error {
	s.m.batchSize.Observe(float64(len(batch)))
	st := make([]recordState, len(batch))
	backoff := s.cfg.RetryBackoff
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
		s.cfg.Logger.Warn("kafka write failed; retrying", "attempt", attempt, "records", pending, "backoff", backoff, "error", retryErr)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, s.cfg.MaxRetryBackoff)
	}
}

// group is the unit of ordering: records of one topic and key.
type group struct{ topic, key string }

// attempt writes the records of batch not yet done, in order, in as few
// calls as their alone flags and the broker's size limit allow, up to and
// including the first call in which a record fails. It returns how many
// records are left, the error to wait out before the next attempt (nil
// when the next one may start at once), or an error that ends publish.
func (s *sink) attempt(ctx context.Context, batch []event, st []recordState) (pending int, retryErr error, err error) {
	order := notDone(st)
	failed := make(map[group]int) // first failed record of each group
	shares := newCallShares(s.limits)
	written := 0 // order[:written] went out, in calls
calls:
	for written < len(order) {
		call := s.nextCall(ctx, batch, st, order[written:], shares)
		written += len(call)
		errs, callErr := s.write(ctx, batch, call)
		if callErr != nil {
			// Nothing of the call is known to be in Kafka.
			if retryErr, err = s.callFailed(ctx, batch, st, call, callErr); err != nil {
				return 0, nil, err
			}
			for _, i := range call {
				noteFailure(failed, batch, i)
			}
			break calls
		}
		var stop bool
		if stop, retryErr, err = s.recordsFailed(batch, st, call, errs, failed); err != nil {
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

// notDone lists the records not done, in batch order.
func notDone(st []recordState) []int {
	order := make([]int, 0, len(st))
	for i := range st {
		if !st[i].done {
			order = append(order, i)
		}
	}
	return order
}

// nextCall is the records of the next call: the first of order, alone if
// it must be, else with as many of the following records not alone as
// every partition's share allows.
func (s *sink) nextCall(ctx context.Context, batch []event, st []recordState, order []int, shares *callShares) []int {
	j := 1
	if !st[order[0]].alone {
		shares.reset(ctx)
		shares.take(&batch[order[0]].msg)
		for j < len(order) && !st[order[j]].alone && shares.take(&batch[order[j]].msg) {
			j++
		}
	}
	return order[:j]
}

// callFailed handles callErr, the failure of a whole call (nothing of it
// is known to be in Kafka): it returns the error to wait out before the
// next attempt, nil when the call's records are to be written alone, or
// an error that ends publish.
func (s *sink) callFailed(ctx context.Context, batch []event, st []recordState, call []int, callErr error) (retryErr, err error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch v := classify(callErr); {
	case v == fatal:
		return nil, permanent(fmt.Errorf("%w: %w", ErrKafkaAuth, callErr))
	case v == retryable:
		return callErr, nil
	case v == topicUnavailable && oneTopic(batch, call):
		if err := s.topicUnavailable(&batch[call[0]], callErr); err != nil {
			return nil, err
		}
		return callErr, nil
	}
	// One record's fault (a topic without partitions, a record over
	// BatchBytes): find which, one by one.
	for _, i := range call {
		st[i].alone = true
	}
	return nil, nil
}

// recordsFailed records the outcome of a call, errs being each record's
// error: a record acknowledged is done; a failed one is noted in failed
// and handled by its error's verdict. It reports whether a record failed
// (the attempt then ends after this call), the error to wait out before
// the next attempt (nil when it may start at once), or an error that ends
// publish.
func (s *sink) recordsFailed(batch []event, st []recordState, call []int, errs []error, failed map[group]int) (stop bool, retryErr, err error) {
	for n, i := range call {
		e := errs[n]
		if e == nil {
			st[i].done = true
			continue
		}
		stop = true
		noteFailure(failed, batch, i)
		v := classify(e)
		switch {
		case v == fatal:
			return stop, nil, permanent(fmt.Errorf("%w: %w", ErrKafkaAuth, e))
		case v == retryable:
			retryErr = e
			continue
		case v == topicUnavailable:
			if err := s.topicUnavailable(&batch[i], e); err != nil {
				return stop, nil, err
			}
			retryErr = e
			continue
		case len(call) > 1:
			st[i].alone = true
			continue
		case v == ownFaultUnlessTransient:
			if st[i].rejects == 0 {
				st[i].since = time.Now()
			}
			st[i].rejects++
			if st[i].rejects < rejectAttempts || time.Since(st[i].since) < rejectAfter {
				retryErr = e
				continue
			}
		}
		if err := s.reject(&batch[i], &st[i], e); err != nil {
			return stop, nil, err
		}
	}
	return stop, retryErr, nil
}

// noteFailure records that record i of batch failed, unless an earlier
// record of its group did.
func noteFailure(failed map[group]int, batch []event, i int) {
	g := group{batch[i].msg.Topic, string(batch[i].msg.Key)}
	if _, ok := failed[g]; !ok {
		failed[g] = i
	}
}

// rewriteAfterFailures marks the records of written (those the attempt
// sent, in batch order) that follow a failed record of their group as not
// done: they go again, after it.
func rewriteAfterFailures(batch []event, st []recordState, written []int, failed map[group]int) {
	if len(failed) == 0 {
		return
	}
	for _, i := range written {
		if f, ok := failed[group{batch[i].msg.Topic, string(batch[i].msg.Key)}]; ok && i > f {
			st[i].done = false
		}
	}
}

// oneTopic reports whether the records call of batch all have one topic.
func oneTopic(batch []event, call []int) bool {
	for _, i := range call[1:] {
		if batch[i].msg.Topic != batch[call[0]].msg.Topic {
			return false
		}
	}
	return true
}

// topicUnavailable records that a write of ev failed with e, a
// topicUnavailable error. It returns a permanent error once ev's topic has
// been failing for longer than TopicUnavailableGrace.
func (s *sink) topicUnavailable(ev *event, e error) error {
	topic := ev.msg.Topic
	reason := "unknown-topic"
	if errors.Is(e, kafka.TopicAuthorizationFailed) {
		reason = "not-authorized"
	}
	u, ok := s.unavailable[topic]
	if !ok || u.reason != reason {
		if ok {
			s.m.topicUnavail.DeleteLabelValues(topic, u.reason)
		} else {
			u.since = time.Now()
		}
		u.reason = reason
		s.unavailable[topic] = u
		s.m.topicUnavail.WithLabelValues(topic, reason).Set(1)
		s.cfg.Logger.Warn("kafka topic unavailable; retrying (its events are never dead-lettered), stopping if it lasts",
			"topic", topic, "reason", reason, "grace", s.cfg.TopicUnavailableGrace, "error", e)
	}
	if d := time.Since(u.since); d > s.cfg.TopicUnavailableGrace {
		return permanent(fmt.Errorf("%w: writes to topic %s failed for %v (topic unavailable grace %v; waiting: message %s): %w",
			ErrTopicUnavailable, topic, d.Round(time.Second), s.cfg.TopicUnavailableGrace, messageID(ev), e))
	}
	return nil
}

// reject handles a record the broker will never accept, with error e: a
// normal record is dead-lettered in place (or, under InvalidStop, stops
// the relay); a dead-letter record becomes the minimal one, and only the
// minimal one refused stops the relay.
func (s *sink) reject(ev *event, st *recordState, e error) error {
	*st = recordState{alone: true}
	if ev.invalid != nil { // a dead-letter record
		if !ev.minimal {
			s.cfg.Logger.Warn("kafka rejected a dead-letter record; sending the minimal one (message ID, reason, detail, original topic)",
				"message_id", ev.invalid.MessageID.String(), "error", e)
			minimalDeadLetter(ev, "kafka rejected the dead-letter record ("+e.Error()+")")
			return nil
		}
		return permanent(fmt.Errorf("%w: the dead-letter topic %s refused even the minimal record (message ID, reason, detail) of message %s (reason %s), so the row cannot be dead-lettered: %w",
			ErrDeadLetter, ev.msg.Topic, ev.invalid.MessageID, ev.invalid.Reason, e))
	}
	inv := &InvalidEventError{MessageID: ev.id, Reason: ReasonKafkaRejected, Detail: "kafka rejected the record: " + e.Error()}
	if errors.Is(e, kafka.MessageSizeTooLarge) || errors.Is(e, kafka.RecordListTooLarge) {
		inv.Reason, inv.Detail = ReasonTooLarge, "the broker rejected the record as too large: "+e.Error()
	}
	if s.cfg.OnInvalid == InvalidStop {
		s.m.invalid.WithLabelValues(inv.Reason).Inc()
		return permanent(inv)
	}
	ev.invalid = inv
	deadLetter(s.cfg, s.m, ev)
	return nil
}

// write sends the records call of batch in one producer call. It returns
// each record's error (nil: acknowledged), or an error of the whole call
// when it cannot say which record failed (nothing was sent, or the call
// timed out).
func (s *sink) write(ctx context.Context, batch []event, call []int) ([]error, error) {
	// Nothing of a call is in use once the producer's write returned: one
	// slice serves every write.
	msgs := s.msgs[:0]
	for _, i := range call {
		msgs = append(msgs, batch[i].msg)
	}
	defer func() { clear(msgs); s.msgs = msgs[:0] }()
	errs, err := s.writeMessages(ctx, msgs)
	if leaderMoved(err, errs) {
		// The transport's metadata is stale until its next refresh (at a
		// random time within kafka-go's 6 s); dropping its connection
		// pools makes the next write read the cluster's layout again.
		s.cfg.Logger.Debug("kafka partition leadership moved; reading the cluster's metadata again")
		s.transport.CloseIdleConnections()
	}
	switch {
	case err == nil:
	case len(msgs) == 1 && ctx.Err() == nil:
		errs = []error{err}
	default:
		return nil, err
	}
	s.countPublished(msgs, errs)
	return errs, nil
}

func (s *sink) writeMessages(ctx context.Context, msgs []kafka.Message) ([]error, error) {
	if s.guard != nil {
		if err := s.guard(); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	errs, err := s.prod.write(wctx, msgs)
	end := time.Now()
	s.m.publishDuration.Observe(end.Sub(start).Seconds())
	failed := err
	for _, e := range errs {
		if failed == nil && e != nil {
			failed = e
		}
	}
	if relaytrace.Written != nil {
		relaytrace.Written(msgs, start, end, failed)
	}
	if failed != nil {
		s.m.publishErrors.Inc()
	}
	return errs, err
}

// leaderMoved reports whether a write failed because a partition's leader
// is not where the transport's metadata says.
func leaderMoved(err error, errs []error) bool {
	moved := func(e error) bool {
		return errors.Is(e, kafka.NotLeaderForPartition) || errors.Is(e, kafka.LeaderNotAvailable) || errors.Is(e, protocol.ErrNoLeader)
	}
	if err != nil {
		return moved(err)
	}
	return slices.ContainsFunc(errs, moved)
}

// countPublished counts the records of msgs that did not fail.
func (s *sink) countPublished(msgs []kafka.Message, errs []error) {
	var topic string
	n := 0
	flush := func() {
		if n > 0 {
			s.m.publishedTo(topic).Add(float64(n))
		}
	}
	for k := range msgs {
		if errs[k] != nil {
			continue
		}
		if msgs[k].Topic != topic {
			flush()
			topic, n = msgs[k].Topic, 0
			if u, ok := s.unavailable[topic]; ok {
				delete(s.unavailable, topic)
				s.m.topicUnavail.DeleteLabelValues(topic, u.reason)
				s.cfg.Logger.Info("kafka topic available again", "topic", topic, "after", time.Since(u.since).Round(time.Millisecond))
			}
		}
		n++
	}
	flush()
}

// callShares sizes one producer call: the producer sends each partition's
// share of a call as one record batch, which must stay within the topic's
// limit (see topicLimits). A record whose partition the sink cannot tell
// (no key) counts against every share of its topic; of a topic whose
// partition count is unknown, a call holds one record.
type callShares struct {
	limits *topicLimits
	ctx    context.Context
	n      int
	topics map[string]*topicShares
}

// topicShares is one topic's part of a call.
type topicShares struct {
	info  topicInfo
	parts []int   // 0..partitions-1, for the balancer
	bytes []int64 // per partition
	wild  int64   // records of unknown partition
	most  int64   // the largest of bytes
}

func newCallShares(l *topicLimits) *callShares {
	return &callShares{limits: l, topics: make(map[string]*topicShares)}
}

// reset starts a new call.
func (c *callShares) reset(ctx context.Context) {
	c.ctx, c.n = ctx, 0
	for _, ts := range c.topics {
		clear(ts.bytes)
		ts.wild, ts.most = 0, 0
	}
}

// take adds m to the call when it is the call's first record or its share
// stays within the limit, and reports whether it did.
func (c *callShares) take(m *kafka.Message) bool {
	ts := c.topics[m.Topic]
	if ts == nil {
		ts = &topicShares{info: c.limits.get(c.ctx, m.Topic)}
		for p := range ts.info.partitions {
			ts.parts = append(ts.parts, p)
		}
		ts.bytes = make([]int64, len(ts.parts))
		c.topics[m.Topic] = ts
	}
	cost := batchCost(m)
	p := -1
	if m.Key != nil && len(ts.parts) > 0 {
		p = (&kafka.Murmur2Balancer{}).Balance(*m, ts.parts...)
	}
	share := ts.most
	if p >= 0 {
		share = ts.bytes[p]
	}
	if c.n > 0 && (share+ts.wild+cost > ts.info.maxShare || len(ts.parts) == 0 && ts.wild > 0) {
		// Over the limit; or a second record of a topic not known yet
		// (its first write creates it, the next call knows its limit).
		return false
	}
	c.n++
	if p >= 0 {
		ts.bytes[p] += cost
		ts.most = max(ts.most, ts.bytes[p])
	} else {
		ts.wild += cost
	}
	return true
}
