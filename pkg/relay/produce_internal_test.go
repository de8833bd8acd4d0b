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
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
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

// A call whose answer does not come in time ends at its context's
// deadline with the context's error, and its connection is closed (the
// late answer would otherwise be read as the next request's): the next
// call, on a new connection, is answered.
func TestProducerCallTimesOut(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.SeedTopics(1, "slow"))
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	p := newProducer(&Config{Brokers: k.Brokers, WriteTimeout: 10 * time.Second}, transport)
	defer p.close()
	write := func(timeout time.Duration, value string) ([]error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return p.write(ctx, []kafka.Message{{Topic: "slow", Key: []byte("k"), Value: []byte(value)}})
	}
	if _, err := write(10*time.Second, "warm"); err != nil { // the metadata and a connection
		t.Fatal(err)
	}
	// kfake runs control functions on its cluster goroutine: the broker
	// answers nothing for a second.
	k.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		time.Sleep(time.Second)
		return nil, nil, false
	})
	start := time.Now()
	if _, err := write(200*time.Millisecond, "late"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past its deadline returned %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("a call with a 200ms deadline returned after %v", d)
	}
	errs, err := write(10*time.Second, "next")
	if err != nil || errs[0] != nil {
		t.Fatalf("the call after a timed-out one: %v, %v", err, errs)
	}
	recs := testenv.WaitForRecords(t, k.Brokers, "slow", 2, 30*time.Second)
	if v := string(recs[len(recs)-1].Value); v != "next" {
		t.Fatalf("last record %q, want next", v)
	}
}

// The producer's connections authenticate with the configured SASL
// mechanism (the broker acknowledges the write); a refused one is an
// authentication error, which stops the relay (classify: fatal).
func TestProducerSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "relay", "right-pw"),
				kfake.SeedTopics(2, "auth"))
			mechanism := func(pw string) sasl.Mechanism {
				if mech == "PLAIN" {
					return plain.Mechanism{Username: "relay", Password: pw}
				}
				m, err := scram.Mechanism(scram.SHA256, "relay", pw)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			// The transport (metadata) authenticates right in both cases;
			// what is tested is the producer's own connections.
			transport := &kafka.Transport{SASL: mechanism("right-pw")}
			defer transport.CloseIdleConnections()
			for _, pw := range []string{"right-pw", "wrong-pw"} {
				p := newProducer(&Config{Brokers: k.Brokers, WriteTimeout: 10 * time.Second, SASL: mechanism(pw)}, transport)
				errs, err := p.write(context.Background(), []kafka.Message{{Topic: "auth", Key: []byte("k"), Value: []byte(pw)}})
				p.close()
				switch {
				case pw == "right-pw" && (err != nil || errs[0] != nil):
					t.Fatalf("write with the right password: %v, %v", err, errs)
				case pw == "wrong-pw" && (err == nil || classify(err) != fatal):
					t.Fatalf("write with a wrong password: %v (verdict %v), want an authentication error", err, classify(err))
				}
			}
		})
	}
}
