package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// consume is the consumer loop of docs/consumers.md ("Any Kafka client"),
// which TestConsumersDocShowsTheExampleLoop keeps identical to this one.
// Each record becomes an inbox.Message, is processed in one transaction with
// the handler's writes, and is settled: a dead-lettered message is written
// to the dead-letter topic, and the offset is committed only when the
// outcome is settled (kgo.DisableAutoCommit). Anything else (Retry, Busy,
// an unknown outcome) delivers the same record again before any later one
// of its partition.
func consume(ctx context.Context, client *kgo.Client, in *inbox.Inbox[pgx.Tx], dlq *inbox.DeadLetterWriter,
	handle inbox.TxHandler[pgx.Tx], report func(inbox.Message, inbox.Result)) error {
	for {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			return err // the context ended, or the client was closed
		}
		for _, r := range fetches.Records() {
			if ctx.Err() != nil {
				return ctx.Err() // the rest is delivered again
			}
			rec := inbox.KafkaRecord{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
				Key: r.Key, Value: r.Value, Time: r.Timestamp}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, inbox.KafkaHeader(h))
			}
			msg := rec.Message()
			work := context.WithoutCancel(ctx) // a started record is settled
			for attempt := 1; ; attempt++ {
				res, err := in.Process(work, msg, handle)
				// Settle writes the dead letter of a dead-lettered message;
				// true: the offset may be committed.
				commit, err := dlq.Settle(work, rec, res, err)
				report(msg, res)
				if commit {
					break
				}
				if errors.Is(err, inbox.ErrConflict) {
					return err // ConflictPolicyStop: stop, commit nothing
				}
				select { // Retry, Busy or unknown: the same record again
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(inbox.DefaultBackoff(attempt)):
				}
			}
			if err := client.CommitRecords(work, r); err != nil {
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
	report := func(msg inbox.Message, res inbox.Result) {
		fmt.Println(strings.TrimSpace(fmt.Sprint(string(msg.Key), " ", res.Outcome, " ", res.ResultRef+res.Reason)))
		if res.Outcome.Acked() {
			if seen++; seen == 5 {
				stop() // every record is settled
			}
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
	// 42 processed shipment/42
	// 42 duplicate shipment/42
	// 43 retry
	// 43 processed shipment/43
	// 44 dead-lettered permanent
	// 45 dead-lettered conflict
	// dead letter: order 44, permanent
	// dead letter: order 45, conflict
}
