package producer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// A transaction's records are read at read_committed only once it
// commits; a producer initialised later with the same transactional ID
// fences the first (its commit fails with ErrFenced) and aborts what it
// left open.
func TestTransactionsAndFencing(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	txn := func(c *producer.Config) { c.TransactionalID = "relay-test" }
	first := newProducer(t, k, txn)
	if err := first.EnsureCompactedTopic(ctx, "progress"); err != nil {
		t.Fatalf("EnsureCompactedTopic: %v", err)
	}
	if err := first.EnsureCompactedTopic(ctx, "progress"); err != nil {
		t.Fatalf("EnsureCompactedTopic again: %v", err)
	}
	cfg := producer.Config{Brokers: k.Brokers}
	write := func(p *producer.Producer, value string) error {
		if err := p.Begin(); err != nil {
			return err
		}
		errs, err := p.Produce(ctx, []*kgo.Record{{Topic: "progress", Key: []byte("slot"), Value: []byte(value)}})
		if err != nil {
			return err
		}
		if errs[0] != nil {
			return errs[0]
		}
		return p.Commit(ctx)
	}
	if _, found, err := producer.ReadLast(ctx, cfg, "progress", "slot", acceptAll); err != nil || found {
		t.Fatalf("ReadLast before any: found %v, %v; want none", found, err)
	}
	if err := first.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := write(first, "1"); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	// An open transaction of the first producer...
	if err := first.Begin(); err != nil {
		t.Fatal(err)
	}
	if errs, err := first.Produce(ctx, []*kgo.Record{{Topic: "progress", Key: []byte("slot"), Value: []byte("stale")}}); err != nil || errs[0] != nil {
		t.Fatalf("produce: %v %v", err, errs)
	}
	// ... is aborted when a second producer initialises.
	second := newProducer(t, k, txn)
	if err := second.Init(ctx); err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if v, found, err := producer.ReadLast(ctx, cfg, "progress", "slot", acceptAll); err != nil || !found || string(v) != "1" {
		t.Fatalf("ReadLast after fencing: %q %v %v; want 1", v, found, err)
	}
	// Kafka answers PRODUCER_FENCED; kfake, having aborted the
	// transaction, INVALID_TXN_STATE.
	if err := first.Commit(ctx); !errors.Is(err, producer.ErrFenced) && !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("the fenced producer's commit: %v, want ErrFenced", err)
	}
	if err := write(second, "2"); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	// A commit returns once the coordinator decided it; the markers that
	// let read_committed readers past the records follow (Kafka writes
	// them asynchronously, and so may kfake).
	testenv.WaitFor(t, 30*time.Second, "the second commit readable", func() (bool, error) {
		v, found, err := producer.ReadLast(ctx, cfg, "progress", "slot", acceptAll)
		if err != nil || (found && string(v) != "1" && string(v) != "2") {
			return false, fmt.Errorf("ReadLast: %q %v %v; want 1, then 2", v, found, err)
		}
		return found && string(v) == "2", nil
	})
}

// A transaction whose records are the client's first to their topic
// commits: every committed record is read at read_committed. The client
// stores a new topic's partitions only after the update that loads them
// has handed them the records buffered meanwhile; a commit in between
// found no partition in the transaction and ended it as an abort,
// returning no error (about one first write in 250 under the race
// detector and a CPU load). Each of the writes below is a first.
func TestFirstWriteToATopicCommits(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := newProducer(t, k, func(c *producer.Config) { c.TransactionalID = "first-writes" })
	if err := p.Init(ctx); err != nil {
		t.Fatal(err)
	}
	const topics = 200
	for i := range topics {
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		errs, err := p.Produce(ctx, []*kgo.Record{{Topic: fmt.Sprintf("fresh-%03d", i), Value: []byte("v")}})
		if err != nil || errs[0] != nil {
			t.Fatalf("produce %d: %v %v", i, err, errs)
		}
		if err := p.Commit(ctx); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeRegex(), kgo.ConsumeTopics("^fresh-"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < topics {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var missing []string
			for i := range topics {
				if name := fmt.Sprintf("fresh-%03d", i); !seen[name] {
					missing = append(missing, name)
				}
			}
			t.Fatalf("%d of %d committed transactions read at read_committed; missing: %v", len(seen), topics, missing)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[r.Topic] = true })
	}
}

// ReadLast reads backwards in growing windows: it finds a key's last
// record behind more records of other keys than its first window holds,
// and the later of two records of the key.
func TestReadLastReadsBackwards(t *testing.T) {
	t.Parallel()
	ctx, k, p := progressTopic(t)
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		errs, err := p.Produce(ctx, recs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
	cfg := producer.Config{Brokers: k.Brokers}
	produce(&kgo.Record{Topic: "progress", Key: []byte("slot"), Value: []byte("old")}, &kgo.Record{Topic: "progress", Key: []byte("slot"), Value: []byte("a")})
	var others []*kgo.Record
	for i := range 3000 { // past the first two windows' start: 1,024, then 8,192 back
		others = append(others, &kgo.Record{Topic: "progress", Key: []byte("other"), Value: []byte(fmt.Sprint(i))})
	}
	produce(others...)
	for key, want := range map[string]string{"slot": "a", "other": "2999"} {
		if v, found, err := producer.ReadLast(ctx, cfg, "progress", key, acceptAll); err != nil || !found || string(v) != want {
			t.Fatalf("ReadLast(%s): %q %v %v; want %s", key, v, found, err, want)
		}
	}
	if _, found, err := producer.ReadLast(ctx, cfg, "progress", "none", acceptAll); err != nil || found {
		t.Fatalf("ReadLast of a key never written: found %v, %v", found, err)
	}
	produce(&kgo.Record{Topic: "progress", Key: []byte("slot"), Value: []byte("b")})
	if v, found, err := producer.ReadLast(ctx, cfg, "progress", "slot", acceptAll); err != nil || !found || string(v) != "b" {
		t.Fatalf("ReadLast(slot) after another: %q %v %v; want b", v, found, err)
	}
}

// progressTopic is a broker with a compacted topic "progress", a producer
// of it, and a context for the test's calls.
func progressTopic(t *testing.T) (context.Context, *testenv.Kafka, *producer.Producer) {
	t.Helper()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	p := newProducer(t, k, nil)
	if err := p.EnsureCompactedTopic(ctx, "progress"); err != nil {
		t.Fatal(err)
	}
	return ctx, k, p
}

// acceptAll accepts every record (ReadLast's filter).
func acceptAll(*kgo.Record) bool { return true }

// ReadLast skips the records its filter refuses: the last accepted one is
// found behind a later refused one.
func TestReadLastFilters(t *testing.T) {
	t.Parallel()
	ctx, k, p := progressTopic(t)
	mark := []kgo.RecordHeader{{Key: "ours", Value: []byte("1")}}
	errs, err := p.Produce(ctx, []*kgo.Record{
		{Topic: "progress", Key: []byte("slot"), Value: []byte("real"), Headers: mark},
		{Topic: "progress", Key: []byte("slot"), Value: []byte("forged")},
	})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatal(err, errs)
	}
	refused := 0
	ours := func(r *kgo.Record) bool {
		if len(r.Headers) == 1 && r.Headers[0].Key == "ours" {
			return true
		}
		refused++
		return false
	}
	v, found, err := producer.ReadLast(ctx, producer.Config{Brokers: k.Brokers}, "progress", "slot", ours)
	if err != nil || !found || string(v) != "real" || refused != 1 {
		t.Fatalf("ReadLast: %q %v %v, %d refused; want real, 1 refused", v, found, err, refused)
	}
}

// An existing topic of another layout than one compacted partition is
// refused, saying what differs.
func TestEnsureCompactedTopicRefusesOtherLayouts(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, "three"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("delete")}, "deleting"); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, k, nil)
	for topic, want := range map[string]string{"three": "has 3 partitions, want 1", "deleting": "cleanup.policy=delete, want compact"} {
		err := p.EnsureCompactedTopic(ctx, topic)
		if !errors.Is(err, producer.ErrTopicLayout) || !strings.Contains(err.Error(), want) {
			t.Fatalf("EnsureCompactedTopic(%s): %v, want ErrTopicLayout saying %q", topic, err, want)
		}
	}
	if err := p.EnsureCompactedTopic(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureCompactedTopic(ctx, "fresh"); err != nil {
		t.Fatalf("the topic it created: %v", err)
	}
}

// ReadLast finds a key's last committed record while a transaction of
// another producer, begun before it, is still open on the partition: the
// progress topic is shared by every slot, and a relay that died inside a
// commit leaves its transaction open until its successor fences it or the
// brokers time it out. The open transaction's record is not read, nor is
// an aborted one's.
func TestReadLastPastAnOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx, k, _ := progressTopic(t)
	cfg := producer.Config{Brokers: k.Brokers}
	txn := func(id string) *producer.Producer {
		p := newProducer(t, k, func(c *producer.Config) { c.TransactionalID = id })
		if err := p.Init(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(p *producer.Producer, key, value string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		if errs, err := p.Produce(ctx, []*kgo.Record{{Topic: "progress", Key: []byte(key), Value: []byte(value)}}); err != nil || errs[0] != nil {
			t.Fatalf("produce: %v %v", err, errs)
		}
	}
	ours := txn("slot")
	write(ours, "slot", "1")
	if err := ours.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	other := txn("other-slot")
	write(other, "other", "open") // left open
	write(ours, "slot", "2")
	if err := ours.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	write(ours, "slot", "aborted")
	if err := ours.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	// The next session of the slot initialises its transactional ID, which
	// waits until the slot's last transaction is decided, then reads.
	txn("slot")
	if v, found, err := producer.ReadLast(ctx, cfg, "progress", "slot", acceptAll); err != nil || !found || string(v) != "2" {
		t.Fatalf("ReadLast(slot) with another producer's transaction open: %q %v %v; want 2", v, found, err)
	}
	if _, found, err := producer.ReadLast(ctx, cfg, "progress", "other", acceptAll); err != nil || found {
		t.Fatalf("ReadLast(other), its only record in an open transaction: found %v, %v; want none", found, err)
	}
}

// An EndTxn whose first attempt went unanswered (the connection cut) and
// that the client retried cannot end a later transaction: the first
// attempt, delivered late at the same producer epoch, would commit the
// transaction open then under transaction.version 1 (the stale EndTxn of
// Jepsen's Kafka analysis), with only the records written so far. The
// producer re-initialises after such a commit, and the late request is
// fenced. kfake speaks EndTxn below v5, as transaction.version 1 does.
func TestStaleEndTxnCannotEndALaterTransaction(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.MaxVersions(kversion.V3_9_0()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := k.Fake(t, "holds an EndTxn back")
	var held *kmsg.EndTxnRequest
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		held = req.(*kmsg.EndTxnRequest)
		return nil, errors.New("connection cut"), true // closes the connection unanswered
	})
	p := newProducer(t, k, func(c *producer.Config) { c.TransactionalID = "stale-endtxn" })
	write := func(value string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		if errs, err := p.Produce(ctx, []*kgo.Record{{Topic: "progress", Key: []byte("slot"), Value: []byte(value)}}); err != nil || errs[0] != nil {
			t.Fatalf("produce %s: %v %v", value, err, errs)
		}
	}
	if err := p.Init(ctx); err != nil {
		t.Fatal(err)
	}
	write("1")
	if err := p.Commit(ctx); err != nil {
		t.Fatalf("commit, its EndTxn retried: %v", err)
	}
	if held == nil {
		t.Fatal("no EndTxn was held back")
	}
	write("2")
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := held.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Abort(ctx); err != nil {
		t.Fatalf("abort the second transaction: %v (the late EndTxn answered %v)", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	if v, found, err := producer.ReadLast(ctx, producer.Config{Brokers: k.Brokers}, "progress", "slot", acceptAll); err != nil || !found || string(v) != "1" {
		t.Fatalf("ReadLast after the abort: %q %v %v; want 1 (the late EndTxn answered %v)", v, found, err, kerr.ErrorForCode(resp.ErrorCode))
	}
	if !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.ProducerFenced) && !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.InvalidProducerEpoch) {
		t.Fatalf("the late EndTxn answered %v, want an epoch error", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// A fenced writer (Config.FenceID) replaced by another of the same fence
// ID cannot land a record after the newer one's: a produce request it had
// already sent (held here by the broker, as a socket buffer or a frozen
// process holds one) is refused once the newer writer initialised, and
// read_committed readers see the old writer's earlier record, then the
// new one's. Without a fence ID (plain idempotent producers, as at-least-
// once mode had) the held record lands after the newer writer's.
func TestFencedWriterCannotLandAfterItsSuccessor(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]kfake.Opt{"tv2": nil, "tv1": {kfake.MaxVersions(kversion.V3_9_0())}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testenv.NewKafka(t, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := k.Fake(t, "holds a produce request back")
			var hold atomic.Bool
			release := make(chan struct{})
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if hold.CompareAndSwap(true, false) {
					c.SleepControl(func() { <-release })
				}
				return nil, nil, false
			})
			fence := func(c *producer.Config) { c.FenceID = "slot-fence" }
			write := func(p *producer.Producer, value string) error {
				errs, err := p.Produce(ctx, []*kgo.Record{{Topic: "t", Key: []byte("k"), Value: []byte(value)}})
				if err == nil {
					err = errs[0]
				}
				return err
			}
			old := newProducer(t, k, fence)
			if err := write(old, "old-1"); err != nil {
				t.Fatal(err)
			}
			hold.Store(true)
			stale := make(chan error, 1)
			go func() { stale <- write(old, "old-2") }()
			testenv.WaitFor(t, 30*time.Second, "the old writer's request held", func() (bool, error) { return !hold.Load(), nil })
			successor := newProducer(t, k, fence)
			if err := successor.Init(ctx); err != nil {
				t.Fatal(err)
			}
			if err := write(successor, "new-1"); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := <-stale; !errors.Is(err, producer.ErrFenced) {
				t.Errorf("the old writer's held write: %v, want ErrFenced", err)
			}
			got := readCommitted(ctx, t, k, "t")
			if !slices.Equal(got, []string{"old-1", "new-1"}) {
				t.Fatalf("read_committed: %q, want old-1 then new-1", got)
			}
		})
	}
}

// readCommitted is every committed record value of partition 0 of topic.
func readCommitted(ctx context.Context, t *testing.T, k *testenv.Kafka, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	var got []string
	for read := int64(0); read < end.Offset; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if read = r.Offset + 1; !r.Attrs.IsControl() {
				got = append(got, string(r.Value))
			}
		})
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	return got
}
