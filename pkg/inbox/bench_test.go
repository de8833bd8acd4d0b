package inbox_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// BenchmarkProcess measures the database cost of the transactional path
// (claim, one-INSERT handler, complete, commit) against the bare INSERT.
func BenchmarkProcess(b *testing.B) {
	db := testenv.NewDB(b)
	ctx := context.Background()
	if _, err := inbox.Migrate(ctx, db.Pool, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text NOT NULL, message_id text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	in, err := inbox.New(&inbox.Config{Consumer: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("inbox", func(b *testing.B) {
		for i := range b.N {
			m := inbox.Message{ID: "m-" + strconv.Itoa(i), BusinessKey: "k-" + strconv.Itoa(i), Payload: []byte(`{}`)}
			_, err := in.Process(ctx, db.Pool, m, func(ctx context.Context, tx pgx.Tx) (string, error) {
				_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.ID)
				return "", err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for i := range b.N {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, "p-"+strconv.Itoa(i), "x"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
