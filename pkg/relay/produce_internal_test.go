package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// A call larger than the request limit goes in several produce requests to
// one leader, each partition's share whole in one of them, and a second
// call reuses the first one's requests: every record arrives.
func TestProducerSplitsLargeCalls(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.SeedTopics(8, "split"))
	var (
		mu       sync.Mutex
		requests int
		shares   = make(map[int32]int) // record batches per partition
	)
	k.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		requests++
		for _, pt := range req.(*kmsg.ProduceRequest).Topics {
			for _, pp := range pt.Partitions {
				shares[pp.Partition]++
			}
		}
		return nil, nil, false
	})
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	p := newProducer(&Config{Brokers: k.Brokers, WriteTimeout: 10 * time.Second}, transport)
	value := []byte(strings.Repeat("v", 1000))
	p.maxRequest = 3 * batchCost(&kafka.Message{Key: []byte("key-00"), Value: value})
	for call := range 2 {
		msgs := make([]kafka.Message, 40)
		for i := range msgs {
			msgs[i] = kafka.Message{Topic: "split", Key: fmt.Appendf(nil, "key-%02d", i), Value: value}
		}
		mu.Lock()
		requests = 0
		clear(shares)
		mu.Unlock()
		errs, err := p.write(context.Background(), msgs)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("call %d, record %d: %v", call, i, e)
			}
		}
		mu.Lock()
		if requests < 2 || len(shares) < 2 {
			t.Fatalf("call %d: %d produce requests holding partitions %v, want several", call, requests, shares)
		}
		for part, n := range shares {
			if n != 1 {
				t.Fatalf("call %d: partition %d's share came in %d record batches, want 1", call, part, n)
			}
		}
		mu.Unlock()
	}
	testenv.WaitForRecords(t, k.Brokers, "split", 80, 30*time.Second)
}

// Each partition's answer in a produce response becomes its records'
// error; a partition the response does not answer is an error too.
func TestPartitionError(t *testing.T) {
	t.Parallel()
	res := &produceAPI.Response{Topics: []produceAPI.ResponseTopic{{
		Topic: "t",
		Partitions: []produceAPI.ResponsePartition{
			{Partition: 0},
			{Partition: 1, ErrorCode: int16(kafka.NotEnoughReplicas)},
			{Partition: 2, ErrorCode: int16(kafka.PolicyViolation), ErrorMessage: "no"},
		},
	}}}
	if err := partitionError(res, "t", 0); err != nil {
		t.Errorf("partition 0: %v, want nil", err)
	}
	if err := partitionError(res, "t", 1); !errors.Is(err, kafka.NotEnoughReplicas) || classify(err) != retryable {
		t.Errorf("partition 1: %v, want NOT_ENOUGH_REPLICAS, retryable", err)
	}
	if err := partitionError(res, "t", 2); !errors.Is(err, kafka.PolicyViolation) || classify(err) != ownFault || !strings.HasSuffix(err.Error(), ": no") {
		t.Errorf("partition 2: %v, want POLICY_VIOLATION with the broker's message, own fault", err)
	}
	for _, missing := range []struct {
		topic string
		part  int32
	}{{"t", 3}, {"u", 0}} {
		if err := partitionError(res, missing.topic, missing.part); err == nil || classify(err) != retryable {
			t.Errorf("%s partition %d, not in the response: %v, want a retryable error", missing.topic, missing.part, err)
		}
	}
}
