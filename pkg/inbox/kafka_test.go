package inbox_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// newKafka is the test's broker (testenv.NewBroker: kfake, or with
// PGOUTBOX_TEST_KAFKA=kafka the Apache Kafka node the test binary shares),
// letting consumer groups use a short session timeout, and the name of
// topic on it (under the test's TopicPrefix), created with the given number
// of partitions. Name the test's other topics, its groups and transactional
// IDs with k.Topic.
func newKafka(t *testing.T, topic string, partitions int) (k *testenv.Kafka, name string) {
	t.Helper()
	k = testenv.NewBroker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	name = k.Topic(topic)
	k.CreateTopics(t, int32(partitions), name)
	return k, name
}

// crashGroup is the consumer group of the crash tests' consumer process
// reading topic (unique to the test, as topic is).
func crashGroup(topic string) string { return topic + ".crash-group" }

// crashDeadLetters is the dead-letter topic of the crash tests' consumer
// process reading topic.
func crashDeadLetters(topic string) string { return topic + ".dlq" }

// testMaxWait is inboxkafka.Config.MaxWait in the consumer tests: a broker
// holds a fetch of idle partitions this long. kgo's client does not wait
// for a fetch in flight at a graceful stop, so it costs the tests nothing;
// TestConsumerReachesADistantBroker runs the default.
const testMaxWait = 1500 * time.Millisecond

// rec is a record to produce; Partition picks the partition exactly.
type rec struct {
	Partition int
	ID, Key   string // message-id and business-key headers ("" omits)
	Value     string
	Extra     []kgo.RecordHeader // appended after the usual headers
}

// kgoRecord is r as a kgo record of topic.
func (r rec) kgoRecord(topic string) *kgo.Record {
	m := &kgo.Record{Topic: topic, Partition: int32(r.Partition), Key: []byte(strconv.Itoa(r.Partition) + "|agg"), Value: []byte(r.Value)}
	if r.ID != "" {
		m.Headers = append(m.Headers, kgo.RecordHeader{Key: "message-id", Value: []byte(r.ID)})
	}
	if r.Key != "" {
		m.Headers = append(m.Headers, kgo.RecordHeader{Key: "business-key", Value: []byte(r.Key)})
	}
	m.Headers = append(m.Headers, kgo.RecordHeader{Key: "event-type", Value: []byte("payment.completed")})
	m.Headers = append(m.Headers, r.Extra...)
	return m
}

// produce writes recs in order, each to its partition, and fails t on error.
func produce(t *testing.T, brokers []string, topic string, recs ...rec) {
	t.Helper()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = r.kgoRecord(topic)
	}
	testenv.Produce(t, brokers, true, krs...)
}

// committedOffsets returns the group's committed offset per partition of
// topic (-1 when none).
func committedOffsets(t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	out, err := testenv.CommittedOffsets(context.Background(), brokers, group, topic, partitions)
	if err != nil {
		t.Errorf("offset fetch: %v", err)
	}
	return out
}

// runningConsumer is a consumer whose Run goes on in the background.
type runningConsumer struct {
	brokers      []string
	group, topic string
	cancel       context.CancelFunc
	done         chan error
}

// startConsumer starts a consumer with cfg; stop ends it (the test's end
// cancels it too).
func startConsumer[TTx any](t *testing.T, cfg *inboxkafka.Config[TTx]) *runningConsumer {
	t.Helper()
	c, err := inboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rc := &runningConsumer{brokers: cfg.Brokers, group: cfg.GroupID, topic: cfg.Topics[0], cancel: cancel, done: make(chan error, 1)}
	go func() { rc.done <- c.Run(ctx) }()
	return rc
}

// waitOffsets waits until the committed offset of every partition in want
// is want's; Run returning first fails t.
func (rc *runningConsumer) waitOffsets(t *testing.T, want map[int]int64) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("offsets %v committed", want), func() (bool, error) {
		select {
		case err := <-rc.done:
			t.Fatalf("Run stopped early: %v", err)
		default:
		}
		offs := committedOffsets(t, rc.brokers, rc.group, rc.topic, len(want))
		for p, off := range want {
			if offs[p] != off {
				return false, nil
			}
		}
		return true, nil
	})
}

// stop stops the consumer gracefully and fails t unless Run returns nil.
func (rc *runningConsumer) stop(t *testing.T) {
	t.Helper()
	rc.cancel()
	if err := <-rc.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// runConsumer runs a consumer with cfg until every partition's committed
// offset reaches want, then stops it gracefully.
func runConsumer[TTx any](t *testing.T, cfg *inboxkafka.Config[TTx], want map[int]int64) {
	t.Helper()
	rc := startConsumer(t, cfg)
	rc.waitOffsets(t, want)
	rc.stop(t)
}

// deadLetters waits until topic dlq holds n records and fails t if it
// holds more.
func deadLetters(t *testing.T, brokers []string, dlq string, n int) []testenv.Record {
	t.Helper()
	recs := testenv.WaitForRecords(t, brokers, dlq, n, time.Minute)
	if len(recs) != n {
		t.Fatalf("%s holds %d records, want %d", dlq, len(recs), n)
	}
	return recs
}
