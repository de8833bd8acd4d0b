package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A committed outbox row arrives in Kafka with its headers.
func ExampleRelay_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()) // an in-process broker
	if err != nil {
		log.Fatal(err)
	}
	defer kafka.Close()

	cfg := &relay.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Kafka:       relay.KafkaConfig{Brokers: kafka.ListenAddrs()},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	r, err := relay.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()

	w, _ := outbox.NewWriter(outbox.Pgx(pool), nil)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(ctx, tx, outbox.Message{
			AggregateType: "payment", AggregateID: "pay-1", EventType: "payment.completed",
			BusinessKey: "payment-request-17", Payload: []byte(`{"amount": 1200}`),
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// Read the record with any Kafka client; here franz-go.
	client, err := kgo.NewClient(kgo.SeedBrokers(kafka.ListenAddrs()...), kgo.ConsumeTopics("outbox.payment"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	pollCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) == 0 && pollCtx.Err() == nil {
		recs = client.PollFetches(pollCtx).Records()
	}
	for _, rec := range recs {
		h := map[string]string{}
		for _, kv := range rec.Headers {
			h[kv.Key] = string(kv.Value)
		}
		fmt.Printf("%s key=%s value=%s event-type=%s business-key=%s\n", rec.Topic, rec.Key, rec.Value, h["event-type"], h["business-key"])
	}

	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// outbox.payment key=pay-1 value={"amount": 1200} event-type=payment.completed business-key=payment-request-17
	// Run: <nil>
}

// Status reads the slot's state without a running relay.
func ExampleStatus() {
	ctx := context.Background()
	cfg := &relay.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Slot:        "orders", Publication: "orders", // names of their own: one slot per outbox
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	st, err := relay.Status(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Slot, st.SlotExists, st.PublicationExists, st.Active, st.WALStatus)
	// Output: orders true true false reserved
}

// The Kafka client's settings are grouped in Config.Kafka; WithDefaults
// returns the effective configuration, or an error wrapping
// relaytype.ErrConfig that names every problem.
func ExampleConfig_WithDefaults() {
	cfg := &relay.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Kafka:       relay.KafkaConfig{Brokers: []string{"kafka:9092"}, Compression: "zstd"},
		BatchSize:   500,
	}
	c, err := cfg.WithDefaults()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Kafka.Brokers, c.Kafka.Compression, c.Kafka.ProgressTopic, c.Kafka.TransactionTimeout, c.BatchSize, c.TableFormat)

	bad := *cfg
	bad.Kafka.Compression = "brotli"
	_, err = bad.WithDefaults()
	fmt.Println(errors.Is(err, relaytype.ErrConfig), err)
	// Output:
	// [kafka:9092] zstd pgoutbox.progress 40s 500 pgoutbox
	// true relay: invalid configuration: compression "brotli": want one of none, gzip, snappy, lz4, zstd
}
