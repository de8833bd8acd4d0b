package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
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
// kfake: bootstrap addresses, comma-separated ("localhost:9092").
const KafkaEnv = "PGOUTBOX_TEST_KAFKA_BROKERS"

var topicPrefixes atomic.Int64

// Topic is name under k's TopicPrefix: the name a test gives a topic or a
// consumer group (or the relay a topic template) on this broker.
func (k *Kafka) Topic(name string) string { return k.TopicPrefix + name }

// NewBroker is the broker of a test that needs only its addresses and
// topics of its own: the external broker named by KafkaEnv; else, with
// KafkaModeEnv=kafka, the Apache Kafka node this test binary shares
// (started on first use, stopped by Main); else a kfake cluster as
// NewKafka(t) starts. On a shared broker Cluster is nil and TopicPrefix is
// unique to the test: name every topic and consumer group with it. The
// broker must create topics on first use (auto.create.topics.enable).
// fakeOpts are passed to kfake (NewKafka) and ignored on a real broker.
func NewBroker(t testing.TB, fakeOpts ...kfake.Opt) *Kafka {
	t.Helper()
	var brokers []string
	switch addrs, mode := os.Getenv(KafkaEnv), os.Getenv(KafkaModeEnv); {
	case addrs != "":
		for _, a := range strings.Split(addrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				brokers = append(brokers, a)
			}
		}
	case mode == "kafka":
		k, err := sharedApacheKafka()
		if err != nil {
			t.Fatal(err)
		}
		brokers = k.Brokers
	case mode == "" || mode == "kfake":
		return NewKafka(t, fakeOpts...)
	default:
		t.Fatalf("%s=%q: want kfake or kafka", KafkaModeEnv, mode)
	}
	return &Kafka{
		Brokers:     brokers,
		TopicPrefix: fmt.Sprintf("t%d-%d-%d.", time.Now().Unix(), os.Getpid(), topicPrefixes.Add(1)),
	}
}

// Fake returns k's kfake cluster for a test that needs its control hooks,
// and skips the test on a real broker, saying why.
func (k *Kafka) Fake(t testing.TB, why string) *kfake.Cluster {
	t.Helper()
	if k.Cluster == nil {
		t.Skipf("needs kfake (%s); this run's broker is real (%s)", why, KafkaModeEnv)
	}
	return k.Cluster
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

// CreateTopics creates topics with the given number of partitions on k's
// broker and waits until every partition has a leader; topics that exist
// already are left alone. It is kfake.SeedTopics for any broker. A test
// whose consumer group joins before anything is produced calls it on a
// real broker: see docs/kafka.md (a topic auto-created by a metadata
// request).
func (k *Kafka) CreateTopics(t testing.TB, partitions int32, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
	WaitFor(t, time.Minute, fmt.Sprintf("leaders for %v", topics), func() (bool, error) {
		md, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return false, nil
		}
		for _, name := range topics {
			td, ok := md[name]
			if !ok || td.Err != nil || len(td.Partitions) == 0 {
				return false, nil
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// TopicExists reports whether k's broker has topic, asking for every topic
// (a metadata request naming it could create it).
func (k *Kafka) TopicExists(t testing.TB, topic string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return md.Has(topic)
}
