package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka is an in-process broker speaking the Kafka wire protocol over TCP on
// a loopback port.
type Kafka struct {
	// Cluster is the kfake cluster, for fault injection (Control) and
	// topic administration.
	Cluster *kfake.Cluster
	// Brokers are the bootstrap addresses ("127.0.0.1:port").
	Brokers []string
}

// DefaultPartitions is the partition count of auto-created topics.
const DefaultPartitions = 4

// NewKafka starts a one-broker cluster with topic auto-creation that is
// closed when t ends. opts are appended to the defaults.
func NewKafka(t testing.TB, opts ...kfake.Opt) *Kafka {
	t.Helper()
	all := append([]kfake.Opt{
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
