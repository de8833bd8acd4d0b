package inbox

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkDatabaseCost measures the database side of the transactional path
// against the bare one-INSERT handler, one message per transaction (Process)
// and 100 per transaction (the consumer loop's batch path). The end-to-end
// figures through Kafka come from test/bench/inboxbench (make bench-inbox).
func BenchmarkDatabaseCost(b *testing.B) {
	db, in := migrated(b, "bench")
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text NOT NULL, payload bytea)`); err != nil {
		b.Fatal(err)
	}
	insert := func(ctx context.Context, tx pgx.Tx, m Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.Payload)
		return "", err
	}
	seq := 0
	next := func() Message {
		seq++
		id := strconv.Itoa(seq)
		return Message{ID: id, BusinessKey: "k" + id, Payload: []byte(`{"a":1}`), Topic: "t", Offset: int64(seq)}
	}
	b.Run("inbox-1", func(b *testing.B) {
		for range b.N {
			m := next()
			if _, err := in.Process(ctx, m, insert); err != nil {
				b.Fatal(err)
			}
		}
	})
	sin := newInbox(b, SQL(db.SQL), "bench-sql")
	b.Run("sql-inbox-1", func(b *testing.B) {
		for range b.N {
			m := next()
			_, err := sin.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, m Message) (string, error) {
				_, err := tx.ExecContext(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.Payload)
				return "", err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-1", func(b *testing.B) {
		for range b.N {
			m := next()
			if _, err := db.Pool.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.Payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inbox-100", func(b *testing.B) {
		for range b.N {
			msgs := make([]Message, 100)
			for j := range msgs {
				msgs[j] = next()
			}
			if _, ok := in.processBatch(ctx, msgs, insert); !ok {
				b.Fatal("batch failed")
			}
		}
	})
	b.Run("plain-100", func(b *testing.B) {
		for range b.N {
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				for range 100 {
					if _, err := insert(ctx, tx, next()); err != nil {
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
