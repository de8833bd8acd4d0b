package inboxkafkago_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafkago"
)

// consume is a kafka-go reader loop driving the inbox: inbox.Deliver takes
// each message to a settled outcome (processed in one transaction with the
// handler's writes, dead-lettered to the dead-letter topic, or a
// duplicate; a Retry, Busy or unknown outcome is processed again first),
// and only then is its offset committed. A transaction marker is skipped.
func consume(ctx context.Context, r *kafka.Reader, in *inbox.Inbox[pgx.Tx], dlq *inbox.DeadLetterWriter,
	handle inbox.TxHandler[pgx.Tx], report func(inbox.KafkaRecord, inbox.Result)) error {
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return err // the context ended, or the reader was closed
		}
		if rec, ok := inboxkafkago.Record(m); ok {
			res, err := inbox.Deliver(ctx, in, dlq, rec, handle)
			if err != nil {
				return err // ctx ended, or ConflictPolicyStop: commit nothing
			}
			report(rec, res)
		}
		if err := r.CommitMessages(context.WithoutCancel(ctx), m); err != nil {
			return err
		}
	}
}

// A service that already runs kafka-go readers hands each message to the
// inbox through Record. Order 42 is labelled and its redelivery is a
// Duplicate; order 44 fails for good (inbox.Permanent) and is
// dead-lettered.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "shipping-kafka-go", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	// An in-process broker holding the records, as the relay publishes
	// them; use your brokers instead.
	broker, err := kfake.NewCluster(kfake.SeedTopics(1, "outbox.order", inbox.DefaultDeadLetterTopic))
	if err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	order := func(id, key, order string) kafka.Message {
		return kafka.Message{Key: []byte(order), Value: []byte(`{"order":"` + order + `"}`),
			Headers: []kafka.Header{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte(key)}}}
	}
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(broker.ListenAddrs()...), Topic: "outbox.order", Transport: transport,
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	if err := w.WriteMessages(ctx,
		order("0193a0b4-7c1e-7d3a-9b1e-000000000042", "order-42-placed", "42"),
		order("0193a0b4-7c1e-7d3a-9b1e-000000000042", "order-42-placed", "42"), // a replay
		order("0193a0b4-7c1e-7d3a-9b1e-000000000044", "order-44-placed", "44"),
	); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	dlq, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[pgx.Tx]{Brokers: broker.ListenAddrs(), Inbox: in})
	if err != nil {
		log.Fatal(err)
	}
	defer dlq.Close()
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     broker.ListenAddrs(),
		GroupID:     "shipping-kafka-go",
		Topic:       "outbox.order",
		StartOffset: kafka.FirstOffset,
		MaxWait:     time.Second,
		Dialer:      &kafka.Dialer{Timeout: 10 * time.Second},
	})
	defer reader.Close()

	// The handler's writes would go in tx, with the claim.
	label := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if string(msg.Key) == "44" {
			return "", inbox.Permanent(errors.New("no such address"))
		}
		return "label/" + string(msg.Key), nil
	}
	runCtx, stop := context.WithTimeout(ctx, time.Minute) // none lost: no wait
	defer stop()
	report := func(rec inbox.KafkaRecord, res inbox.Result) {
		fmt.Println(string(rec.Key), res.Outcome, res.ResultRef+res.Reason)
		if rec.Offset == 2 {
			stop() // the last record is settled
		}
	}
	if err := consume(runCtx, reader, in, dlq, label, report); !errors.Is(err, context.Canceled) {
		log.Fatalf("not every message settled: %v", err)
	}
	// Output:
	// 42 processed label/42
	// 42 duplicate label/42
	// 44 dead-lettered permanent
}
