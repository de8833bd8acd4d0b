package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Any Kafka client can drive the inbox: here a franz-go consumer. Each
// record becomes an inbox.Message through inbox.KafkaRecord, is processed in
// one transaction with the handler's writes, and its offset is committed
// only after that (kgo.DisableAutoCommit). The second delivery of the same
// message is a Duplicate.
func ExampleKafkaRecord_Message() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := inbox.Migrate(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS shipment (order_id text PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(&inbox.Config{Consumer: "shipping", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	// An in-process broker holding one record published twice, as the
	// relay does after a replay; use your brokers instead.
	broker, err := kfake.NewCluster(kfake.SeedTopics(1, "outbox.order"))
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	headers := []kgo.RecordHeader{{Key: "message-id", Value: []byte("0193a0b4-7c1e-7d3a-9b1e-000000000001")},
		{Key: "business-key", Value: []byte("order-42-placed")}}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		rec := &kgo.Record{Topic: "outbox.order", Key: []byte("42"), Value: []byte(`{"order":"42"}`), Headers: headers}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
	producer.Close()

	client, err := kgo.NewClient(
		kgo.SeedBrokers(broker.ListenAddrs()...),
		kgo.ConsumerGroup("shipping"),
		kgo.ConsumeTopics("outbox.order"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	for seen := 0; seen < 2; {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			log.Fatal(err)
		}
		for _, r := range fetches.Records() {
			seen++
			rec := inbox.KafkaRecord{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
				Key: r.Key, Value: r.Value, Time: r.Timestamp}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, inbox.KafkaHeader(h))
			}
			msg := rec.Message()
			res, err := in.Process(ctx, pool, msg, func(ctx context.Context, tx pgx.Tx) (string, error) {
				_, err := tx.Exec(ctx, `INSERT INTO shipment (order_id) VALUES ($1)`, string(msg.Key))
				return "shipment/" + string(msg.Key), err
			})
			if errors.Is(err, inbox.ErrInvalidMessage) {
				continue // no message-id or business-key header: dead-letter it
			}
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(res.Outcome, res.ResultRef)
			// Commit the offset only after the database commit.
			if err := client.CommitRecords(ctx, r); err != nil {
				log.Fatal(err)
			}
		}
	}
	// Output:
	// processed shipment/42
	// duplicate shipment/42
}
