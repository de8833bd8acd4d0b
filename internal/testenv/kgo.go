package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce writes recs in order, one at a time, each acknowledged by every
// in-sync replica, and fails t on error. With manual each record goes to
// its Partition; otherwise by key, as the relay places it (murmur2).
func Produce(t testing.TB, brokers []string, manual bool, recs ...*kgo.Record) {
	t.Helper()
	part := kgo.StickyKeyPartitioner(nil)
	if manual {
		part = kgo.ManualPartitioner()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(part), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", r.Topic, err)
		}
	}
}

// CommittedOffsets returns group's committed offset of each partition
// 0..partitions-1 of topic (-1: none).
func CommittedOffsets(ctx context.Context, brokers []string, group, topic string, partitions int) (map[int]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) { // nothing committed yet
		err, offs = nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, partitions)
	for p := range partitions {
		out[p] = -1
		if o, ok := offs.Lookup(topic, int32(p)); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out, nil
}
