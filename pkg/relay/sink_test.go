package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// answerProduce makes the broker answer the produce requests for whose
// topics code returns non-zero with that error code, and handle the
// others. code is called once per topic of each request.
func answerProduce(k *testenv.Kafka, code func(topic string) int16) {
	answerProduceRecords(k, func(topic string, _ int) int16 { return code(topic) })
}

// answerProduceRecords is answerProduce with the number of records the
// request holds for the topic.
func answerProduceRecords(k *testenv.Kafka, code func(topic string, records int) int16) {
	k.Cluster.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		codes := make(map[string]int16)
		fail := false
		for _, pt := range preq.Topics {
			records := 0
			for _, pp := range pt.Partitions {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(pp.Records) == nil {
					records += int(rb.NumRecords)
				}
			}
			codes[pt.Topic] = code(pt.Topic, records)
			fail = fail || codes[pt.Topic] != 0
		}
		if !fail {
			return nil, nil, false
		}
		// The producer puts several topics in one request, and the
		// broker cannot answer part of it: the topics that pass are
		// answered NOT_LEADER_OR_FOLLOWER, which the producer retries.
		for topic, c := range codes {
			if c == 0 {
				codes[topic] = 6
			}
		}
		return testenv.ProduceErrors(preq, func(topic string) int16 { return codes[topic] }), nil, true
	})
}

// assertLastCopiesInOrder checks that the last copy of each of ids in recs
// (one partition, in offset order) comes in the order of ids.
func assertLastCopiesInOrder(t *testing.T, recs []testenv.Record, ids []string) {
	t.Helper()
	last := make(map[string]int)
	var seq []string
	for n, r := range recs {
		id := header(t, r, "message-id")
		last[id] = n
		seq = append(seq, id[len(id)-4:])
	}
	for i := 1; i < len(ids); i++ {
		if last[ids[i]] < last[ids[i-1]] {
			t.Fatalf("last copy of message %d (offset %d) precedes that of message %d (offset %d); kafka order (ID ends): %v",
				i, last[ids[i]], i-1, last[ids[i-1]], seq)
		}
	}
}

// A write that fails for the first of the calls one partition's records
// are split into (they are over the topic's limit together), and succeeds
// for the next, is retried so that
// the last copies of the aggregate's records are in commit order.
func TestPartialFailureKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var produces atomic.Int32
	answerProduce(b.kafka, func(topic string) int16 {
		if topic == "outbox.order" && produces.Add(1) == 1 {
			return 19 // NOT_ENOUGH_REPLICAS, for the first produce only
		}
		return 0
	})
	b.start(t)
	var msgs []outbox.Message
	for i := 0; i < 40; i++ {
		m := msg("a", i)
		m.Payload = fmt.Appendf(nil, `{"n": %d, "pad": "%s"}`, i, strings.Repeat("p", 50_000))
		msgs = append(msgs, m)
	}
	ids := b.insert(t, msgs...)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	if produces.Load() < 2 {
		t.Fatalf("%d produce requests, want the records split over several", produces.Load())
	}
	assertLastCopiesInOrder(t, recs, ids)
}

// A dead-letter record stays in its place: rows before and after it of
// the same aggregate keep their order, even when its dead-letter record
// would be over the broker's batch limit.
func TestDeadLetterKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.BatchTimeout = time.Second })
	b.start(t)
	ctx := context.Background()
	big := `{"blob": "` + strings.Repeat("x", 1_200_000) + `"}`
	var ids []string
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		for i := 1; i <= 2; i++ {
			id, err := b.writer.InsertTx(ctx, tx, msg("a", i))
			if err != nil {
				return err
			}
			ids = append(ids, id.String())
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers)
			VALUES (gen_random_uuid(), 'order', 'a', 'e', 'kz', $1::jsonb, '[1,2]')`, big)
		if err != nil {
			return err
		}
		id, err := b.writer.InsertTx(ctx, tx, msg("a", 3))
		ids = append(ids, id.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	assertLastCopiesInOrder(t, recs, ids)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", 1, 30*time.Second)
	if r := dlq[0]; header(t, r, "dlq-reason") != relaytype.ReasonBadHeaders || string(r.Key) != "a" || r.Value != nil ||
		header(t, r, "dlq-truncated") != "value" {
		t.Fatalf("dead letter: reason %q, key %q, value %d bytes, dlq-truncated %q; want a bad-headers record without its value",
			header(t, r, "dlq-reason"), r.Key, len(r.Value), header(t, r, "dlq-truncated"))
	}
}

// A row too large because of its key or headers has a dead-letter record
// that fits: every header it carries over is cut to
// MaxDeadLetterHeaderBytes, then the key goes, and when that is not enough
// (many headers) it is the minimal record: no key, no value, only
// message-id, dlq-reason, dlq-detail, original-topic and dlq-truncated.
// dlq-truncated names what was cut. Later rows are published, and Run stops
// when asked.
func TestDeadLetterAlwaysFits(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.start(t)
	hugeHeader := msg("a", 1)
	hugeHeader.Headers = map[string]string{"trace": strings.Repeat("t", 1_200_000)}
	hugeKey := msg(strings.Repeat("k", 1_200_000), 2)
	hugeKey.BusinessKey = "bk-huge-key-2" // the aggregate ID (Kafka key) is what is huge
	manyHeaders := msg("a", 3)
	manyHeaders.Headers = make(map[string]string)
	for i := range 300 {
		manyHeaders.Headers[fmt.Sprintf("h%03d", i)] = strings.Repeat("v", 4000)
	}
	ids := b.insert(t, hugeHeader, hugeKey, manyHeaders)
	good := b.insert(t, msg("b", 4))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", good, 30*time.Second)
	dlq := waitForIDs(t, b.kafka.Brokers, "outbox.dlq", ids, 30*time.Second)
	want := map[string]struct {
		key, headers, truncated string
	}{
		ids[0]: {"a", "dlq-reason,dlq-detail,original-topic,message-id,business-key,event-type,aggregate-type,aggregate-id,trace,dlq-truncated", "trace,value"},
		ids[1]: {"", "dlq-reason,dlq-detail,original-topic,message-id,business-key,event-type,aggregate-type,aggregate-id,dlq-truncated", "aggregate-id,value,key"},
		ids[2]: {"", "dlq-reason,dlq-detail,original-topic,message-id,dlq-truncated", "key,value,headers"},
	}
	for _, r := range dlq {
		id := header(t, r, "message-id")
		var keys []string
		for _, h := range r.Headers {
			keys = append(keys, h.Key)
			if len(h.Value) > relaytype.MaxDeadLetterHeaderBytes {
				t.Fatalf("dead letter %s: header %s of %d bytes", id, h.Key, len(h.Value))
			}
		}
		w := want[id]
		if got := strings.Join(keys, ","); got != w.headers || string(r.Key) != w.key || r.Value != nil ||
			header(t, r, "dlq-reason") != relaytype.ReasonTooLarge || header(t, r, "original-topic") != "outbox.order" ||
			header(t, r, "dlq-truncated") != w.truncated {
			t.Fatalf("dead letter %s: headers %s, key of %d bytes, value of %d bytes, dlq-truncated %q; want headers %s, key %q, dlq-truncated %q",
				id, got, len(r.Key), len(r.Value), header(t, r, "dlq-truncated"), w.headers, w.key, w.truncated)
		}
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
}

// noAutoCreate is a broker without topic auto-creation, with topics.
func noAutoCreate(t *testing.T, topics ...string) *testenv.Kafka {
	t.Helper()
	c, err := kfake.NewCluster(testenv.ProduceByName(), kfake.NumBrokers(1), kfake.SeedTopics(int32(testenv.DefaultPartitions), topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &testenv.Kafka{Cluster: c, Brokers: c.ListenAddrs()}
}

// Records Kafka will never accept (here: a topic whose policy refuses
// them) are dead-lettered with reason kafka-rejected; the rows around them
// are published in order.
func TestKafkaRejectedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.MaxRetryBackoff = 500 * time.Millisecond })
	b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq", "policy")
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	answerProduce(b.kafka, func(topic string) int16 {
		if topic == "policy" {
			return 44 // POLICY_VIOLATION
		}
		return 0
	})
	b.start(t)
	ids := b.insert(t, toTopics("", "policy", "", "policy", "")...)
	good := []string{ids[0], ids[2], ids[4]}
	bad := map[string]string{ids[1]: "policy", ids[3]: "policy"}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", good, 60*time.Second)
	assertLastCopiesInOrder(t, recs, good)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", len(bad), 30*time.Second)
	for _, r := range dlq {
		id := header(t, r, "message-id")
		if header(t, r, "dlq-reason") != relaytype.ReasonKafkaRejected || header(t, r, "original-topic") != bad[id] ||
			!strings.HasPrefix(header(t, r, "dlq-detail"), "kafka rejected the record: ") {
			t.Fatalf("dead letter %s: reason %q, original topic %q (want %q), detail %q", id, header(t, r, "dlq-reason"),
				header(t, r, "original-topic"), bad[id], header(t, r, "dlq-detail"))
		}
	}
	if n := b.metric(t, "pgoutbox_relay_invalid_events_total"); n != float64(len(bad)) {
		t.Fatalf("invalid_events_total %v, want %d", n, len(bad))
	}
}

// A topic that does not exist yet, and one the relay may not write yet,
// are the operator's to fix: the relay retries, shows them in
// topic_unavailable, and delivers every event once the topic exists and
// the ACL is granted. Nothing is dead-lettered.
func TestTopicUnavailableRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.MaxRetryBackoff = 200 * time.Millisecond })
	b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq", "locked")
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	var locked atomic.Bool
	locked.Store(true)
	answerProduce(b.kafka, func(topic string) int16 {
		if topic == "locked" && locked.Load() {
			return 29 // TOPIC_AUTHORIZATION_FAILED
		}
		return 0
	})
	run := b.start(t)
	ids := b.insert(t, toTopics("", "late", "locked", "")...)
	unavailable := func(topic, reason string) func() (bool, error) {
		return func() (bool, error) {
			v, ok := gauge(t, b.reg, "pgoutbox_relay_topic_unavailable", map[string]string{"topic": topic, "reason": reason})
			return ok && v == 1, nil
		}
	}
	testenv.WaitFor(t, 30*time.Second, "late unavailable (unknown-topic)", unavailable("late", "unknown-topic"))
	b.kafka.CreateTopics(t, 1, "late")
	testenv.WaitFor(t, 30*time.Second, "locked unavailable (not-authorized)", unavailable("locked", "not-authorized"))
	locked.Store(false)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", []string{ids[0], ids[3]}, 30*time.Second)
	waitForIDs(t, b.kafka.Brokers, "late", ids[1:2], 30*time.Second)
	waitForIDs(t, b.kafka.Brokers, "locked", ids[2:3], 30*time.Second)
	if dlq := testenv.MustReadTopic(t, b.kafka.Brokers, "outbox.dlq"); len(dlq) != 0 || b.metric(t, "pgoutbox_relay_invalid_events_total") != 0 {
		t.Fatalf("%d dead-letter records, want none", len(dlq))
	}
	if n := b.metric(t, "pgoutbox_relay_topic_unavailable"); n != 0 {
		t.Fatalf("topic_unavailable sums to %v once every topic is writable, want 0", n)
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
}

// stopsOnRow starts the relay, commits one row for topic and waits for Run
// to end. It returns the row's ID and Run's error, and fails t when the
// relay confirmed the row's transaction.
func (b *bundle) stopsOnRow(t *testing.T, topic string) (id string, err error) {
	t.Helper()
	run := b.start(t)
	m := msg("a", 1)
	m.Topic = topic
	id = b.insert(t, m)[0]
	end := b.currentLSN(t)
	err = run.wait(t, 60*time.Second)
	if c := b.confirmedFlush(t); c >= end {
		t.Fatalf("confirmed %s passed the row's transaction (ends before %s); Run: %v", c, end, err)
	}
	return id, err
}

// With OnUnavailableTopic = UnavailableStop, a topic still unavailable
// after TopicUnavailableGrace stops the relay with ErrTopicUnavailable
// naming the topic; the row is not confirmed and not dead-lettered.
func TestTopicUnavailableStops(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.TopicUnavailableGrace = 2 * time.Second
		c.MaxRetryBackoff = 200 * time.Millisecond
		c.OnUnavailableTopic = relay.UnavailableStop
	})
	b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq")
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	id, err := b.stopsOnRow(t, "missing")
	if !errors.Is(err, relaytype.ErrTopicUnavailable) || !relay.IsPermanent(err) || !strings.Contains(err.Error(), "missing") ||
		!strings.Contains(err.Error(), id) {
		t.Fatalf("Run: %v, want a permanent ErrTopicUnavailable naming topic missing and message %s", err, id)
	}
	if dlq := testenv.MustReadTopic(t, b.kafka.Brokers, "outbox.dlq"); len(dlq) != 0 {
		t.Fatalf("%d dead-letter records, want none", len(dlq))
	}
}

// A record Kafka rejects stops the relay under InvalidStop, naming it; so
// does a dead-letter record Kafka rejects (here: no dead-letter topic)
// under InvalidDeadLetter. Neither transaction is confirmed.
func TestKafkaRejectedStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		policy relay.InvalidPolicy
		want   error
	}{
		{"stop", relay.InvalidStop, relaytype.ErrInvalidEvent},
		{"no-dead-letter-topic", relay.InvalidDeadLetter, relaytype.ErrTopicUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *relay.Config) { c.OnInvalid, c.TopicUnavailableGrace = tc.policy, 2*time.Second })
			b.kafka = noAutoCreate(t, "outbox.order", "policy")
			b.cfg.Kafka.Brokers = b.kafka.Brokers
			answerProduce(b.kafka, func(topic string) int16 {
				if topic == "policy" {
					return 44 // POLICY_VIOLATION
				}
				return 0
			})
			id, err := b.stopsOnRow(t, "policy")
			if !errors.Is(err, tc.want) || !relay.IsPermanent(err) || !strings.Contains(err.Error(), id) {
				t.Fatalf("Run: %v, want a permanent error wrapping %v naming %s", err, tc.want, id)
			}
			var inv *relaytype.InvalidEventError
			if tc.policy == relay.InvalidStop && (!errors.As(err, &inv) || inv.Reason != relaytype.ReasonKafkaRejected) {
				t.Fatalf("Run: %v, want an InvalidEventError with reason %s", err, relaytype.ReasonKafkaRejected)
			}
		})
	}
}

// largeRecords commits rows rows of about size bytes of payload, in
// txRows-row transactions, over aggs aggregates, and returns their IDs in
// commit order per aggregate.
func largeRecords(t *testing.T, b *bundle, rows, txRows, aggs, size int) map[string][]string {
	t.Helper()
	order := make(map[string][]string)
	for n := 0; n < rows; n += txRows {
		var msgs []outbox.Message
		for i := n; i < n+txRows && i < rows; i++ {
			m := msg(fmt.Sprintf("agg-%d", i%aggs), i)
			m.Payload = fmt.Appendf(nil, `{"n": %d, "pad": "%s"}`, i, strings.Repeat("p", size))
			msgs = append(msgs, m)
		}
		for i, id := range b.insert(t, msgs...) {
			order[msgs[i].AggregateID] = append(order[msgs[i].AggregateID], id)
		}
	}
	return order
}

// deliveryReport compares recs (kcat's reading of one topic) with the
// commit order of each aggregate: records, duplicates, and aggregates
// whose sequence of copies in Kafka is not their commit order.
func deliveryReport(t *testing.T, recs []testenv.Record, order map[string][]string) (records, duplicates, outOfOrder int) {
	t.Helper()
	got := make(map[string][]string)
	seen := make(map[string]bool)
	for _, r := range recs {
		id := header(t, r, "message-id")
		if seen[id] {
			duplicates++
		}
		seen[id] = true
		got[string(r.Key)] = append(got[string(r.Key)], id)
	}
	for agg, ids := range order {
		if fmt.Sprint(got[agg]) != fmt.Sprint(ids) {
			outOfOrder++
		}
	}
	return len(recs), duplicates, outOfOrder
}

// Records of tens of kilobytes, with the broker at Kafka's default
// message.max.bytes, arrive once each and in commit order per aggregate:
// no batch may exceed what the broker accepts.
func TestLargeRecordsInOrder(t *testing.T) {
	t.Parallel()
	for _, size := range []int{50_000, 96_000} {
		t.Run(fmt.Sprintf("%dKB", size/1000), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.kafka = testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "1048588"}))
			b.cfg.Kafka.Brokers = b.kafka.Brokers
			const rows = 300
			order := largeRecords(t, b, rows, 10, 20, size)
			b.start(t)
			recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", rows, 3*time.Minute)
			n, dups, broken := deliveryReport(t, recs, order)
			errs := b.metric(t, "pgoutbox_relay_publish_errors_total")
			t.Logf("%d B payloads: %d records for %d rows, %d duplicates, %d of %d aggregates out of order, %v publish errors",
				size, n, rows, dups, broken, len(order), errs)
			if n != rows || dups != 0 || broken != 0 || errs != 0 {
				t.Fatalf("%d records for %d rows, %d duplicates, %d aggregates out of order, %v publish errors; want %d, 0, 0, 0",
					n, rows, dups, broken, errs, rows)
			}
		})
	}
}

// A batch the broker refuses as too large in the middle of an aggregate's
// sequence is written again before anything after it: every copy in Kafka
// is in commit order, and none is duplicated.
func TestRefusedBatchKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var refuse atomic.Bool
	var refused atomic.Int32
	answerProduceRecords(b.kafka, func(topic string, records int) int16 {
		// A single record refused as too large is dead-lettered; a
		// batch is written again in smaller parts.
		if topic == "outbox.order" && records > 1 && refuse.CompareAndSwap(true, false) {
			refused.Add(1)
			return 10 // MESSAGE_TOO_LARGE
		}
		return 0
	})
	b.start(t)
	order := largeRecords(t, b, 5, 5, 1, 100)
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 5, 30*time.Second)
	refuse.Store(true)
	more := largeRecords(t, b, 60, 60, 1, 50_000)
	order["agg-0"] = append(order["agg-0"], more["agg-0"]...)
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 65, 60*time.Second)
	n, dups, broken := deliveryReport(t, recs, order)
	if refused.Load() != 1 || n != 65 || dups != 0 || broken != 0 {
		t.Fatalf("%d refused produce requests, %d records, %d duplicates, %d aggregates out of order; want 1, 65, 0, 0",
			refused.Load(), n, dups, broken)
	}
}

// The sink reads the topic's max.message.bytes from the broker and keeps
// every batch under it, even far under Config.MaxMessageBytes.
func TestBatchesFitTheTopicLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.kafka = testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "300000"}))
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	order := largeRecords(t, b, 60, 10, 3, 50_000)
	b.start(t)
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 60, 60*time.Second)
	n, dups, broken := deliveryReport(t, recs, order)
	errs := b.metric(t, "pgoutbox_relay_publish_errors_total")
	if n != 60 || dups != 0 || broken != 0 || errs != 0 {
		t.Fatalf("%d records, %d duplicates, %d aggregates out of order, %v publish errors; want 60, 0, 0, 0", n, dups, broken, errs)
	}
}

// A transaction reaches the sink whole: a sink that is free when the
// reader reads the transaction's first row does not write that row alone
// and the rest after it, but the whole transaction in one write.
func TestTransactionInOneWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	msgs := make([]outbox.Message, 200)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("agg-%d", i%7), i)
	}
	ids := b.insert(t, msgs...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if n := b.metric(t, "pgoutbox_relay_batch_size"); n != 1 {
		t.Fatalf("the transaction of %d rows went out in %v batches, want 1", len(msgs), n)
	}
}

// A write of unequal partition shares sends each partition's share in one
// produce request, in order: the producer buffers a sink batch whole
// before it flushes (with kgo's auto-flushing at linger 0 and one
// idempotent request in flight per broker, a share's first records left
// alone and the rest waited a round trip for them).
func TestPartitionShareInOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var (
		mu       sync.Mutex
		requests = make(map[int32]int) // produce requests holding records, per partition
		records  = make(map[int32]int)
	)
	b.kafka.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.kafka.Cluster.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, pt := range req.(*kmsg.ProduceRequest).Topics {
			if pt.Topic != "outbox.order" {
				continue
			}
			for _, pp := range pt.Partitions {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(pp.Records) == nil && rb.NumRecords > 0 {
					requests[pp.Partition]++
					records[pp.Partition] += int(rb.NumRecords)
				}
			}
		}
		return nil, nil, false
	})
	b.start(t)
	// A first row loads the topic's partitions into the client: records
	// for a topic it does not know yet wait for its metadata and then
	// leave as they are partitioned.
	b.insert(t, msg("agg-warm", 0))
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1, 60*time.Second)
	mu.Lock()
	clear(requests)
	clear(records)
	mu.Unlock()
	batches := b.metric(t, "pgoutbox_relay_batch_size")
	// Three aggregates: shares of about 200, 100 and 50 records, or two
	// aggregates in one partition.
	msgs := make([]outbox.Message, 350)
	order := make(map[string][]string)
	for i := range msgs {
		agg := "agg-0"
		switch {
		case i%7 >= 6:
			agg = "agg-2"
		case i%7 >= 4:
			agg = "agg-1"
		}
		msgs[i] = msg(agg, i)
	}
	ids := b.insert(t, msgs...)
	for i, id := range ids {
		order[msgs[i].AggregateID] = append(order[msgs[i].AggregateID], id)
	}
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1+len(msgs), 60*time.Second)
	if n, dups, broken := deliveryReport(t, recs, order); n != 1+len(msgs) || dups != 0 || broken != 0 {
		t.Fatalf("%d records, %d duplicates, %d aggregates out of order; want %d, 0, 0", n, dups, broken, 1+len(msgs))
	}
	if n := b.metric(t, "pgoutbox_relay_batch_size") - batches; n != 1 {
		t.Fatalf("the transaction of %d rows went out in %v batches, want 1", len(msgs), n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 2 {
		t.Errorf("records went to partitions %v; the test wants shares of several partitions", records)
	}
	for p, n := range requests {
		if n != 1 {
			t.Errorf("partition %d: %d records in %d produce requests, want 1 (requests per partition %v)", p, records[p], n, requests)
		}
	}
}
