package inboxrabbitmq_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxrabbitmq"
)

// The consumer loop of docs/sinks.md, on pgx: each message's effect (here
// a row of table payment) commits with the inbox's claim, and the stream
// offset is stored only after that commit.
func ExampleNew_pgx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO payment (business_key, body) VALUES ($1, $2)`, msg.BusinessKey, msg.Payload)
		return "", err
	}
	c, err := inboxrabbitmq.New(&inboxrabbitmq.Config[pgx.Tx]{
		URI: "rabbitmq-stream://guest:guest@127.0.0.1:5552/", Stream: "outbox.payment",
		Name: "billing", Inbox: in, Handler: charge,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // until ctx ends
		log.Fatal(err)
	}
}
