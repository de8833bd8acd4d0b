package inboxrabbitmq_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver for database/sql

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxrabbitmq"
)

// charge stands for a payment gateway call that takes an idempotency key.
func charge(ctx context.Context, key string, body []byte) (string, error) { return "ch_" + key, nil }

// The two-phase path on database/sql: the gateway is called with the
// business key as its idempotency key outside any transaction, under the
// inbox's lease, and the stream offset is stored only once the outcome is
// recorded.
func ExampleNew() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	in, err := inbox.New(inbox.SQL(db), &inbox.Config{Consumer: "payments"})
	if err != nil {
		log.Fatal(err)
	}
	c, err := inboxrabbitmq.New(&inboxrabbitmq.Config[*sql.Tx]{
		URI:    "rabbitmq-stream://guest:guest@127.0.0.1:5552/",
		Stream: "outbox.payment", Name: "payments", Inbox: in,
		ExternalHandler: func(ctx context.Context, msg inbox.Message, key string) (string, error) {
			return charge(ctx, key, msg.Payload)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil { // until the context ends
		log.Fatal(err)
	}
}
