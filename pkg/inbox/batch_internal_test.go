package inbox

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func BenchmarkBatch(b *testing.B) {
	db := testenv.NewDB(b)
	ctx := context.Background()
	if _, err := Migrate(ctx, db.Pool, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text NOT NULL, payload bytea)`); err != nil {
		b.Fatal(err)
	}
	in, err := New(&Config{Consumer: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	h := func(ctx context.Context, tx pgx.Tx, m Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.Payload)
		return "", err
	}
	b.Run("inbox", func(b *testing.B) {
		for i := range b.N {
			msgs := make([]Message, 100)
			for j := range msgs {
				id := strconv.Itoa(i*100 + j)
				msgs[j] = Message{ID: id, BusinessKey: "k" + id, Payload: []byte(`{"a":1}`), Topic: "t", Offset: int64(j)}
			}
			if _, ok := in.processBatch(ctx, db.Pool, msgs, h); !ok {
				b.Fatal("batch failed")
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		for i := range b.N {
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				for j := range 100 {
					if _, err := h(ctx, tx, Message{BusinessKey: "p" + strconv.Itoa(i*100+j), Payload: []byte(`{"a":1}`)}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
