package relay_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// Producers without the Go package: rows inserted with plain SQL (the id
// comes from the column default, pgoutbox_uuidv7()) and from a trigger on a
// business table are published like any other, and so are rows written
// through database/sql (pgx's stdlib driver).
func TestSQLOnlyAndDatabaseSQLProducersArePublished(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE orders (id text PRIMARY KEY, total_cents int NOT NULL)`,
		`CREATE FUNCTION orders_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload, headers)
			VALUES ('order', NEW.id, 'order.placed', 'order-placed-' || NEW.id,
				jsonb_build_object('id', NEW.id, 'total_cents', NEW.total_cents), '{"source":"trigger"}');
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER orders_outbox AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION orders_outbox()`,
	} {
		if _, err := b.db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)

	// 1. Plain SQL, as psql or a non-Go service would.
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('order', 'o-1', 'order.created', 'sql-1', '{"n": 1}')`); err != nil {
		t.Fatal(err)
	}
	// 2. A trigger on the business table.
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO orders VALUES ('o-2', 1200)`); err != nil {
		t.Fatal(err)
	}
	// 3. database/sql.
	db := stdlib.OpenDBFromPool(b.db.Pool)
	defer db.Close()
	sw, err := outbox.NewWriter(outbox.SQL(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.InsertTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: "o-3", EventType: "order.created",
		BusinessKey: "std-3", Payload: []byte(`{"n": 3}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.EmitTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: "o-4", EventType: "order.created",
		BusinessKey: "std-4", Payload: []byte(`{"n": 4}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 4, time.Minute)
	byKey := map[string]testenv.Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = r
	}
	for key, want := range map[string]struct{ bk, value, source string }{
		"o-1": {"sql-1", `{"n": 1}`, ""},
		"o-2": {"order-placed-o-2", `{"id": "o-2", "total_cents": 1200}`, "trigger"},
		"o-3": {"std-3", `{"n": 3}`, ""},
		"o-4": {"std-4", `{"n": 4}`, ""},
	} {
		r, ok := byKey[key]
		if !ok {
			t.Errorf("no record for %s", key)
			continue
		}
		id, _ := r.Header("message-id")
		bk, _ := r.Header("business-key")
		src, _ := r.Header("source")
		if len(id) != 36 || id[14] != '7' || bk != want.bk || string(r.Value) != want.value || src != want.source {
			t.Errorf("%s: message-id %q, business-key %q, value %s, source %q; want a UUIDv7, %q, %s, %q",
				key, id, bk, r.Value, src, want.bk, want.value, want.source)
		}
	}
}
