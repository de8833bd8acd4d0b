package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// result is what the checker found in one run.
type result struct {
	committed      int // rows in the outbox table
	lost           int // committed rows no read_committed record holds
	duplicated     int // read_committed records beyond the first of a row
	abortedReads   int // read_committed records of a rolled-back row or of an aborted Kafka transaction
	abortedInKafka int // records of aborted Kafka transactions (read_uncommitted only: expected)
	torn           int // committed DB transactions only partly visible
	orderBreaks    int // per key, a record after one of a row committed later
	stale          int // records of a relay after a record of its successor, per partition
	openTxns       int // partitions whose last stable offset stayed below the high watermark
	markers        int // transaction markers read (commit and abort)
	epochs         int // distinct (producer ID, epoch) pairs of transactional records: with transaction.version 2 the epoch moves every transaction
}

// partKey is one partition of one topic.
type partKey struct {
	topic string
	p     int32
}

// offsetSet is a set of record offsets per partition.
type offsetSet map[partKey]map[int64]bool

func (s offsetSet) add(k partKey, o int64) {
	if s[k] == nil {
		s[k] = make(map[int64]bool)
	}
	s[k][o] = true
}

// check reads topics read_committed and read_uncommitted (with the
// transaction markers) and counts r's faults against the ledger and the
// rows the outbox table holds. gens orders the relay instances by
// leadership (a later leader, a higher number).
func check(t *testing.T, brokers []string, topics []string, l *ledger, committed map[uuid.UUID]bool, gens map[string]int) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, closeAdm := admin(t, brokers)
	defer closeAdm()

	var res result
	res.committed = len(committed)
	hwm, lso := waitStable(ctx, t, adm, topics, &res)

	// read_uncommitted with the markers: which offsets belong to aborted
	// Kafka transactions, and the last offset of committed data.
	aborted := make(offsetSet)
	lastCommitted := make(map[partKey]int64)
	pending := make(map[partKey]map[int64][]int64) // producer ID -> offsets in its open transaction
	epochs := make(map[[2]int64]bool)
	consumeAll(ctx, t, brokers, hwm, func(r *kgo.Record) {
		k := partKey{r.Topic, r.Partition}
		if r.Attrs.IsTransactional() && !epochs[[2]int64{r.ProducerID, int64(r.ProducerEpoch)}] {
			epochs[[2]int64{r.ProducerID, int64(r.ProducerEpoch)}] = true
			res.epochs++
		}
		if pending[k] == nil {
			pending[k] = make(map[int64][]int64)
		}
		if r.Attrs.IsControl() {
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(r.Key); err != nil {
				t.Errorf("%s/%d@%d: control record key: %v", r.Topic, r.Partition, r.Offset, err)
				return
			}
			res.markers++
			for _, o := range pending[k][r.ProducerID] {
				if key.Type == kmsg.ControlRecordKeyTypeAbort {
					aborted.add(k, o)
					res.abortedInKafka++
				} else {
					lastCommitted[k] = max(lastCommitted[k], o)
				}
			}
			delete(pending[k], r.ProducerID)
			return
		}
		if !r.Attrs.IsTransactional() {
			lastCommitted[k] = max(lastCommitted[k], r.Offset)
			return
		}
		pending[k][r.ProducerID] = append(pending[k][r.ProducerID], r.Offset)
	})

	// read_committed: the view a consumer of an exactly-once relay has.
	var recs []*kgo.Record
	want := make(map[partKey]int64)
	for k, o := range lastCommitted {
		if o < lso[k] {
			want[k] = o
		}
	}
	consumeUntil(ctx, t, brokers, want, func(r *kgo.Record) { recs = append(recs, r) })
	perTopic := make(map[string]int)
	for _, r := range recs {
		perTopic[r.Topic]++
	}
	crossCheckKcat(ctx, t, brokers, topics, perTopic)

	seen := make(map[uuid.UUID]int)
	byKey := make(map[string][]uuid.UUID) // Kafka order (one key, one partition)
	lastGen := make(map[partKey]int)
	for _, r := range recs {
		k := partKey{r.Topic, r.Partition}
		if aborted[k][r.Offset] {
			res.abortedReads++
			t.Errorf("read_committed returned %s/%d@%d, a record of an aborted Kafka transaction", r.Topic, r.Partition, r.Offset)
		}
		id, err := uuid.Parse(header(r, "message-id"))
		if err != nil {
			t.Errorf("%s/%d@%d: message-id: %v", r.Topic, r.Partition, r.Offset, err)
			continue
		}
		if _, ok := l.rows[id]; !ok {
			t.Errorf("%s/%d@%d: message %s no writer wrote", r.Topic, r.Partition, r.Offset, id)
			continue
		}
		if !committed[id] {
			res.abortedReads++
			t.Errorf("%s/%d@%d: message %s of a rolled-back transaction or savepoint", r.Topic, r.Partition, r.Offset, id)
		}
		if seen[id]++; seen[id] > 1 {
			res.duplicated++
		}
		byKey[string(r.Key)] = append(byKey[string(r.Key)], id)
		inst := header(r, "relay-instance")
		g, ok := gens[inst]
		if !ok {
			t.Errorf("%s/%d@%d: relay-instance %q is none of this run's relays", r.Topic, r.Partition, r.Offset, inst)
		}
		if g < lastGen[k] {
			res.stale++
		}
		lastGen[k] = max(lastGen[k], g)
	}

	txRows := make(map[txID][2]int) // committed rows, of which in Kafka
	for id := range committed {
		row, ok := l.rows[id]
		if !ok {
			t.Errorf("outbox row %s no writer wrote", id)
			continue
		}
		c := txRows[row.tx]
		c[0]++
		if seen[id] > 0 {
			c[1]++
		} else {
			res.lost++
		}
		txRows[row.tx] = c
	}
	for _, c := range txRows {
		if c[1] > 0 && c[1] < c[0] {
			res.torn++
		}
	}
	for key, ids := range byKey {
		for i := 1; i < len(ids); i++ {
			if l.rows[ids[i]].rank < l.rows[ids[i-1]].rank {
				res.orderBreaks++
				if res.orderBreaks <= 5 {
					t.Errorf("key %s: %s (rank %d) after %s (rank %d)", key, ids[i], l.rows[ids[i]].rank, ids[i-1], l.rows[ids[i-1]].rank)
				}
			}
		}
	}
	return res
}

// admin is a kadm client on brokers and its close.
func admin(t *testing.T, brokers []string) (*kadm.Client, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl.Close
}

// waitStable waits until every partition's last stable offset reached its
// high watermark (no Kafka transaction open), counting those that do not
// within a minute, and returns both.
func waitStable(ctx context.Context, t *testing.T, adm *kadm.Client, topics []string, res *result) (hwm, lso map[partKey]int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		stable, err2 := adm.ListCommittedOffsets(ctx, topics...)
		if err2 == nil {
			err2 = stable.Error()
		}
		if err != nil || err2 != nil {
			t.Fatalf("list offsets: %v %v", err, err2)
		}
		hwm, lso = make(map[partKey]int64), make(map[partKey]int64)
		open := 0
		ends.Each(func(o kadm.ListedOffset) { hwm[partKey{o.Topic, o.Partition}] = o.Offset })
		stable.Each(func(o kadm.ListedOffset) { lso[partKey{o.Topic, o.Partition}] = o.Offset })
		for k, h := range hwm {
			if lso[k] < h {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) {
			res.openTxns = open
			if open > 0 {
				t.Errorf("%d partitions with a Kafka transaction still open a minute after the relays stopped (LSO %v, HWM %v)", open, lso, hwm)
			}
			return hwm, lso
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consumeAll reads every partition of ends from the start up to its end
// offset, read_uncommitted with the transaction markers, handing each
// record to f.
func consumeAll(ctx context.Context, t *testing.T, brokers []string, ends map[partKey]int64, f func(*kgo.Record)) {
	t.Helper()
	want := make(map[partKey]int64)
	for k, end := range ends {
		if end > 0 {
			want[k] = end - 1
		}
	}
	read(ctx, t, brokers, want, []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords()}, f)
}

// consumeUntil reads read_committed until each partition of want returned
// its offset (the last committed data record).
func consumeUntil(ctx context.Context, t *testing.T, brokers []string, want map[partKey]int64, f func(*kgo.Record)) {
	t.Helper()
	read(ctx, t, brokers, want, []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}, f)
}

// read consumes the partitions of want from their start until each
// returned a record at or past its offset; it fails t when ctx ends
// first (the records up to there were handed to f).
func read(ctx context.Context, t *testing.T, brokers []string, want map[partKey]int64, opts []kgo.Opt, f func(*kgo.Record)) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	parts := make(map[string]map[int32]kgo.Offset)
	for k := range want {
		if parts[k.topic] == nil {
			parts[k.topic] = make(map[int32]kgo.Offset)
		}
		parts[k.topic][k.p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(parts))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	left := len(want)
	done := make(map[partKey]bool)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading: %d partitions short of their last committed record: %v", left, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := partKey{r.Topic, r.Partition}
			if done[k] {
				return
			}
			f(r)
			if r.Offset >= want[k] {
				done[k] = true
				left--
			}
		})
	}
}

// crossCheckKcat counts each topic's records with kcat at read_committed
// and fails t when a count differs from franz-go's.
func crossCheckKcat(ctx context.Context, t *testing.T, brokers, topics []string, perTopic map[string]int) {
	t.Helper()
	for _, topic := range topics {
		recs, err := testenv.ReadTopicWith(ctx, brokers, topic, "isolation.level=read_committed")
		if err != nil {
			t.Errorf("kcat: %v", err)
			continue
		}
		if len(recs) != perTopic[topic] {
			t.Errorf("%s: kcat (read_committed) reads %d records, franz-go %d", topic, len(recs), perTopic[topic])
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// String is one line of a run's result, for the log.
func (r result) String() string {
	return fmt.Sprintf("committed %d, lost %d, duplicated %d, aborted reads %d, torn %d, order breaks %d, stale %d (aborted Kafka records %d, open transactions %d, markers %d, producer epochs %d)",
		r.committed, r.lost, r.duplicated, r.abortedReads, r.torn, r.orderBreaks, r.stale, r.abortedInKafka, r.openTxns, r.markers, r.epochs)
}
