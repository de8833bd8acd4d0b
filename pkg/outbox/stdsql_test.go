package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// database/sql producers (pgx's stdlib driver here; lib/pq, sqlx, GORM, ent
// and bun hand out the same *sql.Tx) write the same rows as the pgx path,
// in the caller's transaction.
func TestInsertSQLTx(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	db := b.db.SQL

	payload := []byte(`{"note": "Grüße", "amount": 1200}`)
	one := outbox.Message{AggregateType: "payment", AggregateID: "pay-1", EventType: "payment.completed",
		BusinessKey: "req-1", Payload: payload, Headers: map[string]string{"traceparent": "00-abc-01"}, Topic: "payments.v1"}
	many := []outbox.Message{
		{AggregateType: "order", AggregateID: "o-1", EventType: "order.placed", BusinessKey: "k-1", Payload: []byte(`1`)},
		{ID: uuid.MustParse("0190a5b4-0000-7000-8000-000000000001"), AggregateType: "order", AggregateID: "o-1",
			EventType: "order.paid", BusinessKey: "k-2", Payload: []byte(`2`)},
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.writer.InsertSQLTx(ctx, tx, one)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := b.writer.InsertManySQLTx(ctx, tx, many)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if id.Version() != 7 || len(ids) != 2 || ids[0].Version() != 7 || ids[1] != many[1].ID {
		t.Fatalf("ids %s %v", id, ids)
	}
	got := readRow(t, b.db, "public.outbox", id)
	var hdr map[string]string
	if !bytes.Equal(got.Payload, payload) || json.Unmarshal(got.Headers, &hdr) != nil || hdr["traceparent"] != "00-abc-01" ||
		got.Topic == nil || *got.Topic != "payments.v1" || got.BusinessKey != "req-1" {
		t.Fatalf("stored %+v headers %s", got, got.Headers)
	}
	second := readRow(t, b.db, "public.outbox", ids[1])
	if second.EventType != "order.paid" || string(second.Payload) != "2" || second.Headers != nil || second.Topic != nil {
		t.Fatalf("stored %+v", second)
	}

	// A rolled-back transaction writes nothing; an invalid message writes
	// nothing of its batch.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.writer.InsertSQLTx(ctx, tx, one); err != nil {
		t.Fatal(err)
	}
	if _, err := b.writer.InsertManySQLTx(ctx, tx, []outbox.Message{many[0], {AggregateType: "x"}}); err == nil {
		t.Fatal("InsertManySQLTx accepted a message without aggregate_id")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM public.outbox`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d rows (%v), want 3", n, err)
	}
}

// Many rows go in several statements under Postgres' parameter limit.
func TestInsertManySQLTxLargeBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	db := b.db.SQL
	msgs := make([]outbox.Message, 8001)
	for i := range msgs {
		msgs[i] = outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: uuid.NewString(), Payload: []byte(`{}`)}
	}
	err := withSQLTx(ctx, db, func(tx *sql.Tx) error {
		_, err := b.writer.InsertManySQLTx(ctx, tx, msgs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM public.outbox`).Scan(&n); err != nil || n != len(msgs) {
		t.Fatalf("%d rows (%v), want %d", n, err, len(msgs))
	}
}

func withSQLTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
