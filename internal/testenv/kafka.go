package testenv

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Kafka is an in-process broker speaking the Kafka wire protocol over TCP on
// a loopback port.
type Kafka struct {
	// Cluster is the kfake cluster, for fault injection (Control) and
	// topic administration; nil for an external broker (NewBroker).
	Cluster *kfake.Cluster
	// Brokers are the bootstrap addresses ("127.0.0.1:port").
	Brokers []string
	// TopicPrefix starts the name of every topic and consumer group of the
	// test: empty on a broker of its own (kfake), unique to the test on an
	// external one.
	TopicPrefix string
}

// DefaultPartitions is the partition count of auto-created topics.
const DefaultPartitions = 4

// produceMaxVersion is the highest produce request version the test
// brokers speak: v13 (Kafka 4) names topics by ID, and the tests' control
// hooks match produce requests by topic name (the clients negotiate).
const produceMaxVersion = 12

// ProduceByName caps the brokers' produce requests at the last version
// that names topics (see produceMaxVersion).
func ProduceByName() kfake.Opt {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), produceMaxVersion)
	return kfake.MaxVersions(versions)
}

// NewKafka starts a one-broker cluster with topic auto-creation that is
// closed when t ends. opts are appended to the defaults.
func NewKafka(t testing.TB, opts ...kfake.Opt) *Kafka {
	t.Helper()
	all := append([]kfake.Opt{
		ProduceByName(),
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(DefaultPartitions),
	}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &Kafka{Cluster: c, Brokers: c.ListenAddrs()}
}

// KafkaEnv names the environment variable that points the tests written
// for any broker (those that call NewBroker) at an external one instead of
// kfake: bootstrap addresses, comma-separated ("localhost:9092"). CI sets it
// for Apache Kafka and Redpanda.
const KafkaEnv = "PGOUTBOX_TEST_KAFKA_BROKERS"

var topicPrefixes atomic.Int64

// Topic is name under k's TopicPrefix: the name a test gives a topic or a
// consumer group (or the relay a topic template) on this broker.
func (k *Kafka) Topic(name string) string { return k.TopicPrefix + name }

// NewBroker is the broker of a test that needs only its addresses and
// topics of its own: the external broker named by KafkaEnv, else a kfake
// cluster as NewKafka(t) starts. On an external broker, which tests and
// runs share, Cluster is nil and TopicPrefix is unique to the test: name
// every topic and consumer group with it. The broker must create topics on
// first use (auto.create.topics.enable).
func NewBroker(t testing.TB) *Kafka {
	t.Helper()
	addrs := os.Getenv(KafkaEnv)
	if addrs == "" {
		return NewKafka(t)
	}
	var brokers []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			brokers = append(brokers, a)
		}
	}
	return &Kafka{
		Brokers:     brokers,
		TopicPrefix: fmt.Sprintf("t%d-%d-%d.", time.Now().Unix(), os.Getpid(), topicPrefixes.Add(1)),
	}
}

// ProduceErrors answers preq with the error code(topic) for every
// partition of each topic.
func ProduceErrors(preq *kmsg.ProduceRequest, code func(topic string) int16) *kmsg.ProduceResponse {
	resp := preq.ResponseKind().(*kmsg.ProduceResponse)
	for _, pt := range preq.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = pt.Topic, pt.TopicID
		for _, pp := range pt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = pp.Partition
			rp.ErrorCode = code(pt.Topic)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
