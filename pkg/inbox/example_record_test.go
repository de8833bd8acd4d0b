package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// consume is the consumer loop of docs/consumers.md ("Any Kafka client"),
// which TestConsumersDocShowsTheExampleLoop keeps identical to this one.
// Each record becomes an inbox.KafkaRecord that inbox.Deliver takes to a
// settled outcome: processed in one transaction with the handler's writes,
// dead-lettered (written to the dead-letter topic), or a duplicate; a Retry,
// Busy or unknown outcome is processed again first. Only then is the offset
// committed (kgo.DisableAutoCommit), so nothing later of the partition
// commits past an unsettled record.
func consume(ctx context.Context, client *kgo.Client, in *inbox.Inbox[pgx.Tx], dlq *inbox.DeadLetterWriter,
	handle inbox.TxHandler[pgx.Tx], report func(inbox.KafkaRecord, inbox.Result)) error {
	for {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			return err // the context ended, or the client was closed
		}
		for _, r := range fetches.Records() {
			rec := inbox.KafkaRecord{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
				Key: r.Key, Value: r.Value, Time: r.Timestamp}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, inbox.KafkaHeader(h))
			}
			res, err := inbox.Deliver(ctx, in, dlq, rec, handle)
			if err != nil {
				return err // ctx ended, or ConflictPolicyStop: commit nothing
			}
			report(rec, res)
			if err := client.CommitRecords(context.WithoutCancel(ctx), r); err != nil {
				return err
			}
		}
	}
}

// Any Kafka client can drive the inbox: here a franz-go consumer running
// the loop above over five records. Order 42 is shipped; its redelivery is
// a Duplicate; order 43's handler fails once and succeeds on the retry;
// order 44's fails for good (inbox.Permanent) and is dead-lettered; a
// record reusing order 42's message ID under another business key is a
// conflict and is dead-lettered too. Nothing is lost, and both dead letters
// are in inbox.dlq with their reason.
func ExampleKafkaRecord_Message() {
	ctx := context.Background()
	pool, in := exampleInbox(ctx, &inbox.Config{Consumer: "shipping-custom"},
		`CREATE TABLE IF NOT EXISTS shipment (order_id text PRIMARY KEY)`)
	defer pool.Close()

	// An in-process broker holding the records, as the relay publishes
	// them; use your brokers instead.
	broker, err := kfake.NewCluster(kfake.SeedTopics(1, "outbox.order", inbox.DefaultDeadLetterTopic))
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	for _, r := range []struct{ id, key, order string }{
		{"0193a0b4-7c1e-7d3a-9b1e-000000000042", "order-42-placed", "42"},
		{"0193a0b4-7c1e-7d3a-9b1e-000000000042", "order-42-placed", "42"}, // a replay
		{"0193a0b4-7c1e-7d3a-9b1e-000000000043", "order-43-placed", "43"},
		{"0193a0b4-7c1e-7d3a-9b1e-000000000044", "order-44-placed", "44"},
		{"0193a0b4-7c1e-7d3a-9b1e-000000000042", "order-45-placed", "45"}, // a reused message ID
	} {
		rec := &kgo.Record{Topic: "outbox.order", Key: []byte(r.order), Value: []byte(`{"order":"` + r.order + `"}`),
			Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(r.id)}, {Key: "business-key", Value: []byte(r.key)}}}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	dlq, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[pgx.Tx]{Brokers: broker.ListenAddrs(), Inbox: in})
	if err != nil {
		log.Fatal(err)
	}
	defer dlq.Close()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(broker.ListenAddrs()...),
		kgo.ConsumerGroup("shipping-custom"),
		kgo.ConsumeTopics("outbox.order"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	failed43 := false
	handle := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		switch string(msg.Key) {
		case "43":
			if !failed43 {
				failed43 = true
				return "", errors.New("carrier unavailable")
			}
		case "44":
			return "", inbox.Permanent(errors.New("no such address"))
		}
		_, err := tx.Exec(ctx, `INSERT INTO shipment (order_id) VALUES ($1)`, string(msg.Key))
		return "shipment/" + string(msg.Key), err
	}
	runCtx, stop := context.WithTimeout(ctx, time.Minute) // none lost: no wait
	defer stop()
	seen := 0
	report := func(rec inbox.KafkaRecord, res inbox.Result) {
		if res.Outcome == inbox.Processed {
			fmt.Println(string(rec.Key), res.Outcome, res.ResultRef, "after", res.Attempts, "attempts")
		} else {
			fmt.Println(string(rec.Key), res.Outcome, res.ResultRef+res.Reason)
		}
		if seen++; seen == 5 {
			stop() // every record is settled
		}
	}
	if err := consume(runCtx, client, in, dlq, handle, report); !errors.Is(err, context.Canceled) {
		log.Fatalf("%d of 5 records settled: %v", seen, err)
	}

	// The dead letters, read with another client.
	reader, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.ConsumeTopics(inbox.DefaultDeadLetterTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute) // none missing: no wait
	defer cancel()
	for n := 0; n < 2 && rctx.Err() == nil; {
		for _, r := range reader.PollFetches(rctx).Records() {
			n++
			for _, h := range r.Headers {
				if h.Key == inbox.HeaderDLQReason {
					fmt.Printf("dead letter: order %s, %s\n", r.Key, h.Value)
				}
			}
		}
	}
	// Output:
	// 42 processed shipment/42 after 1 attempts
	// 42 duplicate shipment/42
	// 43 processed shipment/43 after 2 attempts
	// 44 dead-lettered permanent
	// 45 dead-lettered conflict
	// dead letter: order 44, permanent
	// dead letter: order 45, conflict
}
