package inboxtest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// NewKafka is the test's broker (testenv.NewBroker: kfake, or with
// PGOUTBOX_TEST_KAFKA=kafka the Apache Kafka node the test binary shares),
// letting consumer groups use a short session timeout, and the name of
// topic on it (under the test's TopicPrefix), created with the given number
// of partitions. Name the test's other topics, its groups and transactional
// IDs with k.Topic.
func NewKafka(t *testing.T, topic string, partitions int) (k *testenv.Kafka, name string) {
	t.Helper()
	k = testenv.NewBroker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	name = k.Topic(topic)
	k.CreateTopics(t, int32(partitions), name)
	return k, name
}

// MaxWait is inboxkafka.Config.MaxWait in the consumer tests: a broker
// holds a fetch of idle partitions this long. kgo's client does not wait
// for a fetch in flight at a graceful stop, so it costs the tests nothing;
// TestConsumerReachesADistantBroker runs the default.
const MaxWait = 1500 * time.Millisecond

// Rec is a record to produce; Partition picks the partition exactly.
type Rec struct {
	Partition int
	ID, Key   string // message-id and business-key headers ("" omits)
	Value     string
	Extra     []kgo.RecordHeader // appended after the usual headers
}

// Spread is n records dealt round-robin over partitions, the i-th with
// business key fmt.Sprintf(keyFormat, i), message ID "m-" and the key, and
// value.
func Spread(n, partitions int, keyFormat, value string) []Rec {
	recs := make([]Rec, n)
	for i := range recs {
		key := fmt.Sprintf(keyFormat, i)
		recs[i] = Rec{Partition: i % partitions, ID: "m-" + key, Key: key, Value: value}
	}
	return recs
}

// EndOffsets is the offset past each partition's last record once recs
// are produced to a new topic: what a group commits when it has handled
// them all.
func EndOffsets(recs []Rec) map[int]int64 {
	ends := map[int]int64{}
	for _, r := range recs {
		ends[r.Partition]++
	}
	return ends
}

// KgoRecord is r as a kgo record of topic.
func (r Rec) KgoRecord(topic string) *kgo.Record {
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

// Produce writes recs in order, each to its partition, and fails t on error.
func Produce(t *testing.T, brokers []string, topic string, recs ...Rec) {
	t.Helper()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = r.KgoRecord(topic)
	}
	testenv.Produce(t, brokers, true, krs...)
}

// CommittedOffsets returns the group's committed offset per partition of
// topic (-1 when none).
func CommittedOffsets(t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	out, err := testenv.CommittedOffsets(context.Background(), brokers, group, topic, partitions)
	if err != nil {
		t.Errorf("offset fetch: %v", err)
	}
	return out
}

// DeadLetters waits until topic dlq holds n records and fails t if it
// holds more.
func DeadLetters(t *testing.T, brokers []string, dlq string, n int) []testenv.Record {
	t.Helper()
	recs := testenv.WaitForRecords(t, brokers, dlq, n, time.Minute)
	if len(recs) != n {
		t.Fatalf("%s holds %d records, want %d", dlq, len(recs), n)
	}
	return recs
}
