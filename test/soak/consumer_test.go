package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A partition leader move does not rewind the soak's consumer. kfake
// answers OffsetForLeaderEpoch for the epoch before the move with
// UNDEFINED_EPOCH_OFFSET until the new leader has appended a batch; with
// the reset offset AtStart, kgo then put the consumer back at offset 0 and
// reported ErrDataLoss. The test holds every append back until the new
// leader has answered the consumer's epoch question, the order in which
// the soak met the bug.
func TestConsumerKeepsOffsetOverLeaderMove(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	cons, err := kgo.NewClient(consumerOpts(c.ListenAddrs(), "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := 0
	consume := func(until int) {
		for next < until {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records", next, until)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("after %d records: %v", next, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) != strconv.Itoa(next) {
					t.Fatalf("record %d is %q (offset %d): the consumer was moved", next, r.Value, r.Offset)
				}
				next++
			})
		}
	}
	produce(0, 10)
	consume(10)

	to := (c.LeaderFor(topic, 0) + 1) % 2
	asked := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() == to {
			// The cluster handles this request before the next one it
			// reads, so the answer precedes the appends below.
			select {
			case asked <- struct{}{}:
			default:
			}
		}
		return nil, nil, false
	})
	if err := c.MoveTopicPartition(topic, 0, to); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the consumer never asked the new leader where its epoch ended")
	}
	produce(10, 15)
	consume(15)
}
