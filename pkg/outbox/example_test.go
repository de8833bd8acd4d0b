package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"; lib/pq works the same

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// The business change and its event commit in one transaction.
func ExampleWriter_InsertTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	driver := outbox.Pgx(pool)
	if _, err := outbox.Migrate(ctx, driver, ""); err != nil { // or relay setup, or psql -f sql/outbox/*.sql
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS payment (id text PRIMARY KEY, status text NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	w, err := outbox.NewWriter(driver, nil) // public.outbox
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

	var event string
	if err := pool.QueryRow(ctx, `SELECT event_type FROM outbox WHERE business_key = 'payment-request-17'`).Scan(&event); err != nil {
		log.Fatal(err)
	}
	fmt.Println(event)
	// Output: payment.completed
}

// database/sql (pgx's stdlib driver, lib/pq, and sqlx, GORM, ent or bun on
// top of them): the same Writer, Migrate and row, in the caller's *sql.Tx.
func ExampleSQL() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	driver := outbox.SQL(db)
	if _, err := outbox.Migrate(ctx, driver, ""); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoice (id text PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}
	w, err := outbox.NewWriter(driver, nil)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO invoice (id) VALUES ('inv-9')`); err != nil {
		log.Fatal(err)
	}
	if _, err := w.InsertTx(ctx, tx, outbox.Message{
		AggregateType: "invoice",
		AggregateID:   "inv-9",
		EventType:     "invoice.issued",
		BusinessKey:   "invoice-inv-9",
		Payload:       []byte(`{"total": 4200}`),
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	var event string
	if err := db.QueryRowContext(ctx, `SELECT event_type FROM outbox WHERE business_key = 'invoice-inv-9'`).Scan(&event); err != nil {
		log.Fatal(err)
	}
	fmt.Println(event)
	// Output: invoice.issued
}

// Producers in other languages, or triggers, insert with plain SQL: the id
// defaults to pgoutbox_uuidv7().
func Example_plainSQL() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := outbox.Migrate(ctx, outbox.Pgx(pool), ""); err != nil {
		log.Fatal(err)
	}
	var id string
	err = pool.QueryRow(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('order', '42', 'order.placed', 'order-42-placed', '{"total": 1200}') RETURNING id::text`).Scan(&id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("UUID version", string(id[14]))
	// Output: UUID version 7
}
