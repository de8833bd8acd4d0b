package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions (Config.TransactionalID set): the caller begins a
// transaction, produces into it, and commits it; readers at
// read_committed see its records only once it commits. A producer of the
// same transactional ID that initialises later (Init) fences this one:
// its next transactional call fails with PRODUCER_FENCED, and the broker
// aborts the transaction it left open.

// ErrFenced means a newer producer of the same transactional ID took
// over; nothing of the open transaction will commit.
var ErrFenced = errors.New("producer: fenced by a newer producer of the same transactional ID")

// Init initialises the producer's ID now (rather than at the first
// write), which fences every older producer of its transactional ID and
// aborts the transaction such a producer left open.
func (p *Producer) Init(ctx context.Context) error {
	_, _, err := p.cl.ProducerID(ctx)
	return fenced(err)
}

// Begin starts a transaction.
func (p *Producer) Begin() error { return fenced(p.cl.BeginTransaction()) }

// Commit commits the open transaction once every record produced in it is
// acknowledged. When an EndTxn request of the commit went unanswered, the
// producer re-initialises before it returns (see end).
func (p *Producer) Commit(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	return p.end(ctx, kgo.TryCommit)
}

// Abort aborts the open transaction, failing what it still buffers; it
// re-initialises as Commit does.
func (p *Producer) Abort(ctx context.Context) error {
	if err := p.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	return p.end(ctx, kgo.TryAbort)
}

// end ends the open transaction. An EndTxn request the client wrote and
// got no answer to (its connection cut or timed out) is an indefinite
// outcome: the client retries it, and the first may still reach the
// coordinator after the retry ended the transaction. Under
// transaction.version 1 the producer epoch does not move between
// transactions, so that late request would end whichever transaction is
// open then, at whatever point its writes are (Jepsen's analysis of
// Kafka's transaction protocol): a commit with part of its records, or an
// abort of records the producer saw acknowledged while the rest commit.
// After an end with an unanswered EndTxn, the producer therefore closes
// its client and initialises a new one (InitProducerID bumps the epoch),
// so the late request is fenced. When the end itself fails, the client
// bumps the epoch at its next transaction, and the caller starts anew.
func (p *Producer) end(ctx context.Context, try kgo.TransactionEndTry) error {
	before := p.ends.unanswered()
	if err := fenced(p.cl.EndTransaction(ctx, try)); err != nil {
		return err
	}
	if p.ends.unanswered() == before {
		return nil
	}
	p.cfg.Logger.Warn("kafka transaction ended, but an EndTxn request of it went unanswered and was retried; "+
		"re-initialising the transactional producer so that the first, if it still arrives, cannot end a later transaction",
		"transactional_id", cmp.Or(p.cfg.TransactionalID, p.cfg.FenceID), "commit", bool(try))
	if err := p.reinit(ctx); err != nil {
		return fmt.Errorf("producer: re-initialise after an unanswered EndTxn (the transaction did end): %w", err)
	}
	return nil
}

// reinit replaces the client with a new one of the same options and
// initialises its producer ID, which fences every request of the old
// one's epoch. No transaction may be open.
func (p *Producer) reinit(ctx context.Context) error {
	cl, err := kgo.NewClient(p.opts...)
	if err != nil {
		return err
	}
	p.cl.Close()
	p.cl = cl
	p.stored.reset()
	return p.Init(ctx)
}

// fenced wraps err with ErrFenced when a newer producer fenced this one.
func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// Fenced writes (Config.FenceID): every Produce call of an at-least-once
// producer is a transaction of the writer's fence ID, which every writer
// that may take over from it shares (the relays of one slot). A successor
// initialises the ID before its first write (Init), which aborts what the
// old writer has open and bumps the epoch: a write the old one had
// already started (a request in a socket buffer or in the client's queue
// when the process froze, sent when it resumes) is refused or aborted,
// never committed after the successor's records. Without it nothing at
// the broker fences an idempotent producer.

// ErrAbortedWithCall is the error of a record that was written, but in a
// fenced Produce call whose transaction was aborted because another of its
// records failed: the record is not visible to read_committed readers and
// must be written again.
var ErrAbortedWithCall = errors.New("producer: the record's transaction was aborted with a failed record of the same call")

// transactional reports whether the producer writes in transactions.
func (p *Producer) transactional() bool {
	return p.cfg.TransactionalID != "" || p.cfg.FenceID != ""
}

// awaitPartitionsStored waits until the client holds the partitions of
// each fresh topic (one it was not yet seen to hold) that a record of recs
// reached, errs being their outcomes.
//
// The client learns a new topic's partitions in a metadata update that
// hands the records it buffered meanwhile to their partitions first and
// stores the partitions after. Preempted in between, the update lets
// those records be written and acknowledged, and a flush return, before
// the partitions are stored. A commit then finds no partition added to
// the transaction and, with records written, ends it as an abort and
// returns no error: the records are lost while the caller takes them for
// committed. kfake showed it about once in 250 first transactions under
// the race detector. Waiting here closes that window: a partition a
// record was acknowledged on is stored within moments.
func (p *Producer) awaitPartitionsStored(ctx context.Context, recs []*kgo.Record, errs []error, fresh map[string]bool) error {
	ctx, cancel := context.WithTimeout(ctx, partitionsStoredWait)
	defer cancel()
	for i, r := range recs {
		if errs[i] != nil || !fresh[r.Topic] {
			continue
		}
		delete(fresh, r.Topic)
		for {
			if leader, _, _ := p.cl.PartitionLeader(r.Topic, r.Partition); leader >= 0 {
				p.stored.add(r.Topic)
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("producer: the client did not store the partitions of topic %s after writing to it: %w", r.Topic, context.Cause(ctx))
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// partitionsStoredWait bounds awaitPartitionsStored.
const partitionsStoredWait = 10 * time.Second

// storedTopics are the topics whose partitions a transactional producer's
// client holds, as awaitPartitionsStored saw; a new client holds none.
type storedTopics struct {
	mu sync.Mutex
	m  map[string]bool
}

// fresh returns the topics of recs not seen stored, nil if none.
func (s *storedTopics) fresh(recs []*kgo.Record) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fresh map[string]bool
	for i, r := range recs {
		if i > 0 && r.Topic == recs[i-1].Topic {
			continue // runs of one topic are the rule: one lookup each
		}
		if !s.m[r.Topic] {
			if fresh == nil {
				fresh = make(map[string]bool)
			}
			fresh[r.Topic] = true
		}
	}
	return fresh
}

// add notes topic stored.
func (s *storedTopics) add(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxTopics {
		s.m = make(map[string]bool)
	}
	s.m[topic] = true
}

// reset forgets every topic: for a new client.
func (s *storedTopics) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = nil
}

// produceFenced is Produce as one transaction of the fence ID: committed
// when every record is acknowledged; aborted otherwise, every record then
// failed (those acknowledged with ErrAbortedWithCall). An epoch error of
// the end, or of a record, is the call's error, wrapping ErrFenced. A
// commit whose outcome is unknown fails every record with its error.
func (p *Producer) produceFenced(ctx context.Context, recs []*kgo.Record) ([]error, error) {
	if err := p.Begin(); err != nil {
		return nil, err
	}
	errs, err := p.produce(ctx, recs)
	if err != nil {
		return nil, err // Close aborts what is open
	}
	failed := false
	for _, e := range errs {
		if e == nil {
			continue
		}
		if e = fenced(e); errors.Is(e, ErrFenced) {
			_ = p.Abort(ctx)
			return nil, e
		}
		failed = true
	}
	if failed {
		if err := p.Abort(ctx); err != nil {
			return nil, err
		}
		for i := range errs {
			if errs[i] == nil {
				errs[i] = ErrAbortedWithCall
			}
		}
		return errs, nil
	}
	if err := p.Commit(ctx); err != nil {
		if errors.Is(err, ErrFenced) {
			return nil, err
		}
		// The outcome is unknown: the client's documented abort re-runs
		// InitProducerID, which ends it either way.
		if aerr := p.Abort(ctx); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		for i := range errs {
			errs[i] = err
		}
	}
	return errs, nil
}

// ErrTopicLayout means a topic exists with a layout the caller cannot use
// (EnsureCompactedTopic: not one partition, or not compacted).
var ErrTopicLayout = errors.New("producer: topic layout")

// EnsureCompactedTopic creates topic with one partition and
// cleanup.policy=compact unless it exists. An existing topic must have that
// layout: otherwise the error wraps ErrTopicLayout and says what differs.
// A cleanup policy the brokers do not let us read (DescribeConfigs denied)
// is not checked.
func (p *Producer) EnsureCompactedTopic(ctx context.Context, topic string) error {
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mres, err := md.RequestWith(ctx, p.cl)
	if err != nil {
		return err
	}
	if len(mres.Topics) == 1 && mres.Topics[0].ErrorCode == 0 {
		if n := len(mres.Topics[0].Partitions); n != 1 {
			return fmt.Errorf("%w: topic %s has %d partitions, want 1", ErrTopicLayout, topic, n)
		}
		return p.checkCompacted(ctx, topic)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "cleanup.policy", kmsg.StringPtr("compact")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	res, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return err
	}
	for _, t := range res.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			if t.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *t.ErrorMessage)
			}
			return err
		}
	}
	return nil
}

// checkCompacted returns an error wrapping ErrTopicLayout when topic's
// cleanup.policy does not include compact.
func (p *Producer) checkCompacted(ctx context.Context, topic string) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"cleanup.policy"}
	req.Resources = append(req.Resources, rr)
	res, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return err
	}
	for _, r := range res.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
				p.cfg.Logger.Warn("cannot read the cleanup policy of the topic (DescribeConfigs denied); not checked", "topic", topic, "error", err)
				return nil
			}
			return fmt.Errorf("describe the configuration of topic %s: %w", topic, err)
		}
		for _, c := range r.Configs {
			if c.Name != "cleanup.policy" || c.Value == nil {
				continue
			}
			if !slices.Contains(strings.Split(*c.Value, ","), "compact") {
				return fmt.Errorf("%w: topic %s has cleanup.policy=%s, want compact", ErrTopicLayout, topic, *c.Value)
			}
		}
	}
	return nil
}

// ReadLast returns the value of the last record of key in partition 0 of
// topic that accept accepts, among the records written outside a
// transaction or in a transaction that committed; found is false when
// there is none. accept sees only those records.
//
// It reads read_uncommitted, up to the partition's high watermark, and
// decides each transactional record by the next marker of its producer in
// the partition. A read_committed read stops at the last stable offset,
// the first offset of the oldest transaction still open: on a topic that
// other producers write too (every slot's relay writes the progress
// topic), a transaction one of them left open (a relay that died inside a
// commit, until its successor fences it or the brokers time it out) would
// hide every commit after it, and a session would resume from older
// progress. A record whose transaction is not decided below the high
// watermark is not read: the caller decides its own transactions first
// (Init waits for the last one's markers).
//
// It reads backwards, in windows growing from readLastWindow records: the
// key's last record is usually near the end (a relay writes one per
// transaction), and the active segment of a compacted topic is never
// compacted, so a read from the start would grow with every transaction
// since the segment rolled. Each window is read up to the high watermark,
// where the markers of its transactions are.
func ReadLast(ctx context.Context, cfg Config, topic, key string, accept func(*kgo.Record) bool) (value []byte, found bool, err error) {
	return ReadLastSeeing(ctx, cfg, topic, key, accept, nil)
}

// ReadLastSeeing is ReadLast that also hands seen, when set, every
// committed record of another key in the offsets it reads (the windows up
// to the one holding key's last record; all of them when there is none).
func ReadLastSeeing(ctx context.Context, cfg Config, topic, key string, accept func(*kgo.Record) bool, seen func(*kgo.Record)) (value []byte, found bool, err error) {
	end, err := highWatermark(ctx, cfg, topic)
	if err != nil {
		return nil, false, err
	}
	for window, below := int64(readLastWindow), end; below > 0; window *= 8 {
		from := max(0, end-window)
		if value, found, err = readLastIn(ctx, cfg, topic, key, accept, seen, from, below, end); err != nil || found {
			return value, found, err
		}
		below = from
	}
	return nil, false, nil
}

// readLastWindow is the size of ReadLast's first window, in offsets.
const readLastWindow = 1024

// readLastIn returns the value of the last record of key that accept
// accepts at offsets from (inclusive) to below (exclusive) in partition 0
// of topic, written outside a transaction or in one whose commit marker
// is below end, handing seen (when set) the records of other keys so
// written at those offsets; it reads from from to end.
func readLastIn(ctx context.Context, cfg Config, topic, key string, accept func(*kgo.Record) bool, seen func(*kgo.Record), from, below, end int64) (value []byte, found bool, err error) {
	cl, err := kgo.NewClient(ClientOpts(cfg,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	var last int64 // the offset of value
	// take judges a record written outside a transaction or in a
	// committed one.
	take := func(r *kgo.Record) {
		switch {
		case string(r.Key) != key:
			if seen != nil {
				seen(r)
			}
		case (!found || r.Offset > last) && accept(r):
			value, found, last = r.Value, true, r.Offset
		}
	}
	decide := CommittedOnly(func(r *kgo.Record) error { take(r); return nil })
	for next := from; next < end; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, e error) { ferr = e })
		if ferr != nil {
			return nil, false, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = max(next, r.Offset+1)
			// A marker below end decides its records; a record at or past
			// below is not read.
			if r.Offset < end && (r.Attrs.IsControl() || r.Offset < below) {
				_ = decide(r)
			}
		})
	}
	return value, found, nil
}

// highWatermark is partition 0 of topic's high watermark: the end of what
// read_uncommitted readers may read.
func highWatermark(ctx context.Context, cfg Config, topic string) (int64, error) {
	cl, err := kgo.NewClient(ClientOpts(cfg)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 0 // read_uncommitted
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("list offsets of %s: no answer", topic)
	}
	p := res.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	return p.Offset, nil
}

// producerPartition is one producer's records in one partition.
type producerPartition struct {
	topic     string
	partition int32
	producer  int64
}

// CommittedOnly wraps each for a read_uncommitted read (with
// kgo.KeepControlRecords): it is called at once for a record written
// outside a transaction, at the commit marker for the records of a
// transaction, never for those of an aborted one (or
// of one whose marker is not read). A control record is passed only to
// decide its producer's records.
func CommittedOnly(each func(*kgo.Record) error) func(*kgo.Record) error {
	undecided := make(map[producerPartition][]*kgo.Record)
	return func(r *kgo.Record) error {
		k := producerPartition{r.Topic, r.Partition, r.ProducerID}
		switch {
		case r.Attrs.IsControl():
			recs := undecided[k]
			delete(undecided, k)
			var key kmsg.ControlRecordKey
			if key.ReadFrom(r.Key) != nil || key.Type != kmsg.ControlRecordKeyTypeCommit {
				return nil
			}
			for _, c := range recs {
				if err := each(c); err != nil {
					return err
				}
			}
		case r.Attrs.IsTransactional():
			undecided[k] = append(undecided[k], r)
		default:
			return each(r)
		}
		return nil
	}
}
