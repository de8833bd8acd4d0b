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

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// A redelivered message is acknowledged without running its handler again.
func ExampleInbox_Process() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payment (request_id text PRIMARY KEY, amount int)`); err != nil {
		log.Fatal(err)
	}

	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	msg := inbox.Message{ID: "0193a0b4-7c1e-7d3a", BusinessKey: "req-42", Payload: []byte(`{"amount":1200}`)}
	charge := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO payment VALUES ($1, 1200)`, msg.BusinessKey)
		return "payment/" + msg.BusinessKey, err
	}
	for range 2 {
		res, err := in.Process(ctx, msg, charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Outcome, res.ResultRef)
	}
	// Output:
	// processed payment/req-42
	// duplicate payment/req-42
}

// The two-phase path passes the business key to the external system as its
// idempotency key; failures are retried until the attempt limit.
func ExampleInbox_ProcessExternal() {
	ctx := context.Background()
	pool, in := exampleInbox(ctx, &inbox.Config{Consumer: "mailer", MaxAttempts: 2}, "")
	defer pool.Close()
	msg := inbox.Message{ID: "m-7", BusinessKey: "welcome-mail-user-7", Payload: []byte(`{}`)}
	send := func(ctx context.Context, _ inbox.Message, idempotencyKey string) (string, error) {
		return "", errors.New("smtp: 451 try again later")
	}
	for range 3 {
		res, err := in.ProcessExternal(ctx, msg, send)
		if err != nil {
			log.Fatal(err)
		}
		reason := res.Reason
		if reason == "" {
			reason = "(will retry)"
		}
		fmt.Printf("%s after %d attempts %s\n", res.Outcome, res.Attempts, reason)
	}
	// Output:
	// retry after 1 attempts (will retry)
	// dead-lettered after 2 attempts max-attempts
	// dead-lettered after 2 attempts failed-final
}

// A provider without idempotency keys: the first attempt saves its request
// reference, the provider charges, and the response is lost (a timeout). The
// retry learns it is attempt 2, asks the provider about the saved reference,
// finds the charge and completes without charging again.
func ExampleAttemptFromContext() {
	ctx := context.Background()
	pool, in := exampleInbox(ctx, &inbox.Config{Consumer: "payments"}, "")
	defer pool.Close()
	charges := map[string]string{} // the provider: charge ID by request reference
	charge := func(ctx context.Context, _ inbox.Message, key string) (string, error) {
		a, _ := inbox.AttemptFromContext(ctx)
		if id, found := charges[a.PreviousRequestRef]; found {
			fmt.Printf("attempt %d: %s already charged as %s\n", a.Number, a.PreviousRequestRef, id)
			return id, inbox.ErrAlreadyDone
		}
		ref := fmt.Sprintf("%s/%d", key, a.Number)
		if err := inbox.SaveRequestRef(ctx, ref); err != nil {
			return "", err
		}
		charges[ref] = fmt.Sprintf("ch-%d", len(charges)+1)
		fmt.Printf("attempt %d: charged %s\n", a.Number, ref)
		if a.Number == 1 {
			return "", errors.New("provider: response lost (timeout)")
		}
		return charges[ref], nil
	}
	msg := inbox.Message{ID: "m-9", BusinessKey: "order-9", Payload: []byte(`{"amount_cents":990}`)}
	for range 2 {
		res, err := in.ProcessExternal(ctx, msg, charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s, reconciled %v, result %q\n", res.Outcome, res.Reconciled, res.ResultRef)
	}
	fmt.Println("charges:", len(charges))
	// Output:
	// attempt 1: charged order-9/1
	// retry, reconciled false, result ""
	// attempt 2: order-9/1 already charged as ch-1
	// processed, reconciled true, result "ch-1"
	// charges: 1
}

// exampleInbox is the setup ExampleInbox_Process spells out, for the other
// examples: a pool on DATABASE_URL, the inbox table migrated, the
// application's table (ddl, when not empty) and an Inbox with cfg. Close
// the pool when done.
func exampleInbox(ctx context.Context, cfg *inbox.Config, ddl string) (*pgxpool.Pool, *inbox.Inbox[pgx.Tx]) {
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		log.Fatal(err)
	}
	if ddl != "" {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			log.Fatal(err)
		}
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	in, err := inbox.New(inbox.Pgx(pool), cfg)
	if err != nil {
		log.Fatal(err)
	}
	return pool, in
}
