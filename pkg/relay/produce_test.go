package relay_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// produceSeen counts the record batches of topic the brokers receive in
// produce requests, by broker, with their records and compression codecs.
type produceSeen struct {
	mu      sync.Mutex
	byNode  map[int32]int
	codecs  map[int8]int
	batches int
	records int
	// leaders, when set, is where each partition's batches belong;
	// misrouted counts those that went elsewhere.
	leaders   map[int32]int32
	misrouted int
}

func watchProduce(k *testenv.Kafka, topic string) *produceSeen {
	s := &produceSeen{byNode: make(map[int32]int), codecs: make(map[int8]int)}
	k.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, pt := range req.(*kmsg.ProduceRequest).Topics {
			if pt.Topic != topic {
				continue
			}
			for _, pp := range pt.Partitions {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(pp.Records) == nil && rb.NumRecords > 0 {
					s.byNode[k.Cluster.CurrentNode()]++
					s.codecs[int8(rb.Attributes&7)]++
					s.batches++
					s.records += int(rb.NumRecords)
					if l, ok := s.leaders[pp.Partition]; ok && l != k.Cluster.CurrentNode() {
						s.misrouted++
					}
				}
			}
		}
		return nil, nil, false
	})
	return s
}

// On a cluster of three brokers each request goes to its partitions'
// leader; when the leaders move mid-stream, the relay follows them at once
// (kgo reads the cluster's metadata again after a NOT_LEADER answer
// instead of waiting for its periodic refresh), and every event arrives
// once, in commit order per aggregate.
func TestLeadersMoveMidStream(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.MaxRetryBackoff = 200 * time.Millisecond })
	b.kafka = testenv.NewKafka(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "outbox.order"))
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	for p := range int32(6) { // two partitions led by each broker
		if err := b.kafka.Cluster.MoveTopicPartition("outbox.order", p, p%3); err != nil {
			t.Fatal(err)
		}
	}
	seen := watchProduce(b.kafka, "outbox.order")
	b.start(t)
	order := make(map[string][]string)
	insert := func(from, to int) {
		for n := from; n < to; n += 50 {
			var msgs []outbox.Message
			for i := n; i < n+50; i++ {
				msgs = append(msgs, msg(fmt.Sprintf("agg-%d", i%40), i))
			}
			for i, id := range b.insert(t, msgs...) {
				order[msgs[i].AggregateID] = append(order[msgs[i].AggregateID], id)
			}
		}
	}
	insert(0, 500)
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 500, 30*time.Second)
	seen.mu.Lock()
	before := len(seen.byNode)
	seen.mu.Unlock()
	if before < 2 {
		t.Fatalf("records went to brokers %v; the test wants partitions led by several", seen.byNode)
	}
	leaders := make(map[int32]int32)
	for p := range int32(6) {
		leaders[p] = (p + 1) % 3
		if err := b.kafka.Cluster.MoveTopicPartition("outbox.order", p, leaders[p]); err != nil {
			t.Fatal(err)
		}
	}
	seen.mu.Lock()
	seen.leaders = leaders
	seen.mu.Unlock()
	insert(500, 1000)
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1000, 60*time.Second)
	n, dups, broken := deliveryReport(t, recs, order)
	if n != 1000 || dups != 0 || broken != 0 {
		t.Fatalf("%d records, %d duplicates, %d aggregates out of order; want 1000, 0, 0", n, dups, broken)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	// Without a prompt metadata read the relay wrote 24 and 72 batches to
	// former leaders. kgo reads the metadata again after the first
	// NOT_LEADER, but a second request per partition may already be in
	// flight (linger 0, several requests in flight per broker): at most
	// two per partition.
	if seen.misrouted > 12 {
		t.Fatalf("%d record batches went to a former leader, want at most 12 (two per partition)", seen.misrouted)
	}
}

// The relay compresses each record batch with the configured codec, and an
// independent client reads the records back.
func TestCompressedBatches(t *testing.T) {
	t.Parallel()
	for codec, name := range map[int8]string{1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *relay.Config) { c.Kafka.Compression = name })
			seen := watchProduce(b.kafka, "outbox.order")
			b.start(t)
			var msgs []outbox.Message
			for i := range 20 {
				m := msg(fmt.Sprintf("agg-%d", i%5), i)
				// Compressible even alone: kgo sends a batch that its codec
				// does not shrink uncompressed, and a partition's batch
				// may hold a single record.
				m.Payload = fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", 512))
				msgs = append(msgs, m)
			}
			ids := b.insert(t, msgs...)
			recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
			for _, r := range recs {
				if len(r.Value) == 0 || r.Value[0] != '{' {
					t.Fatalf("record %s: value %q, want the JSON payload", header(t, r, "message-id"), r.Value)
				}
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if seen.batches == 0 || seen.codecs[codec] != seen.batches {
				t.Fatalf("record batches by codec %v, want all %d with codec %d (%s)", seen.codecs, seen.batches, codec, name)
			}
		})
	}
}
