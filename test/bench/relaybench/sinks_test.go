package main

import (
	"context"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// TestRabbitMQCount checks the drain's end as the bench reads it from
// RabbitMQ: the messages its consumer of the stream received, after
// writes in batches of several chunks.
func TestRabbitMQCount(t *testing.T) {
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx := context.Background()
	b, err := startRabbitMQBroker(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	if err := b.fresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.count(ctx); err != nil || n != 0 {
		t.Fatalf("empty stream: count %d, %v", n, err)
	}
	pr, err := b.env.NewProducer(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	want := int64(0)
	for _, size := range []int{1, 700, 3, 1000} {
		batch := make([]message.StreamMessage, size)
		for i := range batch {
			batch[i] = amqp.NewMessage([]byte("x"))
		}
		if err := pr.BatchSend(batch); err != nil {
			t.Fatal(err)
		}
		want += int64(size)
		testenv.WaitFor(t, 30*time.Second, "the count", func() (bool, error) {
			n, err := b.count(ctx)
			t.Logf("count %d, want %d", n, want)
			return n == want, err
		})
	}
}
