package relay_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A committed outbox row arrives in Kafka with its headers.
func ExampleRelay_Run() {
	ctx := context.Background()
	db, err := testenv.OpenDB() // a fresh test database; use your own
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()) // an in-process broker
	if err != nil {
		log.Fatal(err)
	}
	defer kafka.Close()

	cfg := &relay.Config{
		DatabaseURL: db.URL,
		Brokers:     kafka.ListenAddrs(),
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

	w, _ := outbox.NewWriter(nil)
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(ctx, tx, outbox.Message{
			AggregateType: "payment", AggregateID: "pay-1", EventType: "payment.completed",
			BusinessKey: "payment-request-17", Payload: []byte(`{"amount": 1200}`),
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// Read the topic with kcat until the record is there.
	var recs []testenv.Record
	for deadline := time.Now().Add(time.Minute); len(recs) == 0 && time.Now().Before(deadline); {
		recs, _ = testenv.ReadTopic(ctx, kafka.ListenAddrs(), "outbox.payment")
		time.Sleep(100 * time.Millisecond)
	}
	for _, rec := range recs {
		event, _ := rec.Header("event-type")
		key, _ := rec.Header("business-key")
		fmt.Printf("%s key=%s value=%s event-type=%s business-key=%s\n", rec.Topic, rec.Key, rec.Value, event, key)
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
	db, err := testenv.OpenDB()
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	cfg := &relay.Config{DatabaseURL: db.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := relay.Setup(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	st, err := relay.Status(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Slot, st.SlotExists, st.PublicationExists, st.Active, st.WALStatus)
	// Output: pgoutbox true true false reserved
}
