package outbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// The business change and its event commit in one transaction.
func ExampleWriter_InsertTx() {
	ctx := context.Background()
	db, err := testenv.OpenDB() // a fresh test database; use your own pool
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	pool := db.Pool

	if _, err := outbox.Migrate(ctx, pool, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE payment (id text PRIMARY KEY, status text NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	w, err := outbox.NewWriter(nil)
	if err != nil {
		log.Fatal(err)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO payment (id, status) VALUES ('pay-1', 'completed')`); err != nil {
			return err
		}
		_, err := w.InsertTx(ctx, tx, outbox.Message{
			AggregateType: "payment",
			AggregateID:   "pay-1",
			EventType:     "payment.completed",
			BusinessKey:   "payment-request-17",
			Payload:       []byte(`{"amount": 1200, "currency": "EUR"}`),
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	var event, key string
	if err := pool.QueryRow(ctx, `SELECT event_type, business_key FROM outbox`).Scan(&event, &key); err != nil {
		log.Fatal(err)
	}
	fmt.Println(event, key)
	// Output: payment.completed payment-request-17
}
