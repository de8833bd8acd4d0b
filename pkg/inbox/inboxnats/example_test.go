package inboxnats_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxnats"
)

// The consumer loop of docs/sinks.md: each message's effect (here a row of
// table payment) commits with the inbox's claim, and the message is
// acknowledged only after that commit.
func ExampleNew() {
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
	c, err := inboxnats.New(&inboxnats.Config[pgx.Tx]{
		URL: "nats://127.0.0.1:4222", Stream: "OUTBOX", Durable: "billing",
		Inbox: in, Handler: charge,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(ctx); err != nil { // until ctx ends
		log.Fatal(err)
	}
}
