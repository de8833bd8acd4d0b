package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// An application on database/sql (and so on sqlx, GORM, ent or bun, which
// hand out the *sql.DB and *sql.Tx underneath) gets the same guarantees:
// the handler's writes commit in the claim's transaction, and a redelivery
// is a Duplicate that does not run the handler.
func ExampleSQL() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	driver := inbox.SQL(db)
	// Or run "inbox migrate", or psql -f sql/inbox/*.up.sql.
	if _, err := inbox.Migrate(ctx, driver, ""); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refund (request_id text PRIMARY KEY, amount int)`); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(driver, &inbox.Config{Consumer: "refunds", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	msg := inbox.Message{ID: "0193a0b4-7c1e-7d3a-9b1e-00000000sql1", BusinessKey: "refund-7", Payload: []byte(`{"amount":300}`)}
	refund := func(ctx context.Context, tx *sql.Tx, msg inbox.Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO refund VALUES ($1, 300)`, msg.BusinessKey)
		return "refund/" + msg.BusinessKey, err
	}
	for range 2 {
		res, err := in.Process(ctx, msg, refund)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Outcome, res.ResultRef)
	}
	// Output:
	// processed refund/refund-7
	// duplicate refund/refund-7
}
