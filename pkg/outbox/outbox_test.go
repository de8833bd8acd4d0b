package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

func TestMain(m *testing.M) { testenv.MainWithDatabase(m) }

type bundle struct {
	db     *testenv.DB
	writer *outbox.Writer
}

func setup(t *testing.T, cfg *outbox.Config) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	var table string
	if cfg != nil {
		table = cfg.Table
	}
	if _, err := outbox.Migrate(context.Background(), db.Pool, table); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, writer: w}
}

// inTx runs fn in a transaction of db, committed when fn returns nil, and
// returns its result: pgx.BeginFunc for a function that yields a value.
func inTx[T any](t *testing.T, db *testenv.DB, fn func(pgx.Tx) (T, error)) (T, error) {
	t.Helper()
	var v T
	err := pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
		var err error
		v, err = fn(tx)
		return err
	})
	return v, err
}

type storedRow struct {
	ID                                                 uuid.UUID
	AggregateType, AggregateID, EventType, BusinessKey string
	Payload                                            []byte
	Headers                                            []byte
	Topic                                              *string
}

func readRow(t *testing.T, db *testenv.DB, table string, id uuid.UUID) storedRow {
	t.Helper()
	var r storedRow
	err := db.Pool.QueryRow(context.Background(), `SELECT id, aggregate_type, aggregate_id, event_type, business_key,
		payload::text::bytea, headers::text::bytea, topic FROM `+table+` WHERE id = $1`, id).
		Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.EventType, &r.BusinessKey, &r.Payload, &r.Headers, &r.Topic)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestInsertTxRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	// jsonb prints in its own canonical form; this payload is already in it,
	// so the stored bytes must equal the input exactly. Non-ASCII included.
	payload := []byte(`{"note": "Grüße, 東京 ✓", "amount": 1200, "currency": "EUR"}`)
	msg := outbox.Message{
		AggregateType: "payment",
		AggregateID:   "pay-42",
		EventType:     "payment.completed",
		BusinessKey:   "req-7",
		Payload:       payload,
		Headers:       map[string]string{"traceparent": "00-abc-def-01"},
		Topic:         "payments.v1",
	}
	id, err := inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) { return b.writer.InsertTx(ctx, tx, msg) })
	if err != nil {
		t.Fatal(err)
	}
	if id.Version() != 7 {
		t.Fatalf("generated ID %s is version %d, want 7", id, id.Version())
	}
	got := readRow(t, b.db, "public.outbox", id)
	if got.AggregateType != "payment" || got.AggregateID != "pay-42" || got.EventType != "payment.completed" || got.BusinessKey != "req-7" {
		t.Fatalf("stored row %+v", got)
	}
	if !bytes.Equal(got.Payload, payload) {
		t.Fatalf("payload changed:\n got %q\nwant %q", got.Payload, payload)
	}
	var hdr map[string]string
	if err := json.Unmarshal(got.Headers, &hdr); err != nil || hdr["traceparent"] != "00-abc-def-01" {
		t.Fatalf("headers %s (%v)", got.Headers, err)
	}
	if got.Topic == nil || *got.Topic != "payments.v1" {
		t.Fatalf("topic %v", got.Topic)
	}
}

func TestInsertTxKeepsGivenIDAndNulls(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	want := uuid.MustParse("0190f0e0-0000-7000-8000-000000000001")
	id, err := inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) {
		return b.writer.InsertTx(context.Background(), tx, outbox.Message{
			ID: want, AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{}`),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if id != want {
		t.Fatalf("returned %s, want %s", id, want)
	}
	got := readRow(t, b.db, "public.outbox", want)
	if got.Headers != nil || got.Topic != nil {
		t.Fatalf("want NULL headers and topic, got %q %v", got.Headers, got.Topic)
	}
}

func TestInsertManyTx(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	msgs := make([]outbox.Message, 1000)
	for i := range msgs {
		msgs[i] = outbox.Message{
			AggregateType: "order",
			AggregateID:   fmt.Sprintf("order-%d", i%37),
			EventType:     "order.created",
			BusinessKey:   fmt.Sprintf("bk-%d", i),
			Payload:       []byte(fmt.Sprintf(`{"n": %d}`, i)),
		}
	}
	ids, err := inTx(t, b.db, func(tx pgx.Tx) ([]uuid.UUID, error) { return b.writer.InsertManyTx(ctx, tx, msgs) })
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1000 {
		t.Fatalf("%d IDs", len(ids))
	}
	seen := map[uuid.UUID]bool{}
	for i, id := range ids {
		if seen[id] || id == uuid.Nil {
			t.Fatalf("ID %d (%s) duplicate or nil", i, id)
		}
		seen[id] = true
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM public.outbox`).Scan(&n); err != nil || n != 1000 {
		t.Fatalf("count %d, %v", n, err)
	}
	got := readRow(t, b.db, "public.outbox", ids[999])
	if string(got.Payload) != `{"n": 999}` || got.BusinessKey != "bk-999" || got.AggregateID != "order-0" {
		t.Fatalf("row 999: %+v", got)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	valid := outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{"x":1}`)}
	tests := []struct {
		name   string
		modify func(*outbox.Message)
		want   string
	}{
		{"aggregate type", func(m *outbox.Message) { m.AggregateType = "" }, "invalid outbox message: aggregate type is required"},
		{"aggregate id", func(m *outbox.Message) { m.AggregateID = "" }, "invalid outbox message: aggregate ID is required"},
		{"event type", func(m *outbox.Message) { m.EventType = "" }, "invalid outbox message: event type is required"},
		{"business key", func(m *outbox.Message) { m.BusinessKey = "" }, "invalid outbox message: business key is required"},
		{"long business key", func(m *outbox.Message) { m.BusinessKey = strings.Repeat("k", 1025) },
			"invalid outbox message: invalid key: business key is 1025 bytes long (at most 1024)"},
		{"business key not utf-8", func(m *outbox.Message) { m.BusinessKey = "k\xff" },
			"invalid outbox message: invalid key: business key is not valid UTF-8"},
		{"business key NUL", func(m *outbox.Message) { m.BusinessKey = "k\x00k" },
			"invalid outbox message: invalid key: business key contains a NUL byte"},
		{"aggregate id not utf-8", func(m *outbox.Message) { m.AggregateID = "\xc3" },
			"invalid outbox message: aggregate ID is not valid UTF-8 or holds a NUL byte"},
		{"aggregate id NUL", func(m *outbox.Message) { m.AggregateID = "a\x00" },
			"invalid outbox message: aggregate ID is not valid UTF-8 or holds a NUL byte"},
		{"relay's header", func(m *outbox.Message) {
			m.Headers = map[string]string{"trace": "t", "Original-Topic": "payments.commands"}
		},
			"invalid outbox message: header \"Original-Topic\" is written by the relay (the relay would dead-letter the message as bad-headers)"},
		{"dlq header", func(m *outbox.Message) { m.Headers = map[string]string{"dlq-reason": "none"} },
			"invalid outbox message: header \"dlq-reason\" is written by the relay (the relay would dead-letter the message as bad-headers)"},
		{"bad topic", func(m *outbox.Message) { m.Topic = "orders/eu" },
			"invalid outbox message: invalid topic: topic \"orders/eu\" is not a legal Kafka topic name (allowed: a-z A-Z 0-9 . _ -) (the relay would dead-letter the message as bad-topic)"},
		{"nil payload", func(m *outbox.Message) { m.Payload = nil }, "invalid outbox message: payload is required"},
		{"bad json", func(m *outbox.Message) { m.Payload = []byte(`{"x":`) }, "invalid outbox message: payload is not valid JSON (set Config.RawPayload for a text or bytea payload column)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid
			tt.modify(&m)
			_, err := inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) {
				return b.writer.InsertTx(context.Background(), tx, m)
			})
			if !errors.Is(err, outbox.ErrInvalidMessage) || err.Error() != tt.want {
				t.Fatalf("InsertTx: got %v, want %q", err, tt.want)
			}
			_, err = inTx(t, b.db, func(tx pgx.Tx) ([]uuid.UUID, error) {
				return b.writer.InsertManyTx(context.Background(), tx, []outbox.Message{valid, m})
			})
			wantBatch := "invalid outbox message: message 1: " + tt.want[len("invalid outbox message: "):]
			if !errors.Is(err, outbox.ErrInvalidMessage) || err.Error() != wantBatch {
				t.Fatalf("InsertManyTx: got %v, want %q", err, wantBatch)
			}
			_, err = inTx(t, b.db, func(tx pgx.Tx) (uuid.UUID, error) {
				return b.writer.EmitTx(context.Background(), tx, m)
			})
			if !errors.Is(err, outbox.ErrInvalidMessage) || err.Error() != tt.want {
				t.Fatalf("EmitTx: got %v, want %q", err, tt.want)
			}
		})
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM public.outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("invalid messages wrote %d rows (%v)", n, err)
	}
}

func TestRawPayloadByteaTable(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA billing; CREATE TABLE billing.events (
		id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		business_key text NOT NULL, payload bytea NOT NULL, headers jsonb, topic text, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWriter(&outbox.Config{Table: "billing.events", RawPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{0x00, 0xff, 0xfe, '\n', 'x', 0x80}
	var ids []uuid.UUID
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		id, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k1", Payload: payload})
		ids = append(ids, id)
		if err != nil {
			return err
		}
		more, err := w.InsertManyTx(ctx, tx, []outbox.Message{{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k2", Payload: payload}})
		ids = append(ids, more...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var got []byte
		if err := db.Pool.QueryRow(ctx, `SELECT payload FROM billing.events WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("payload %x, want %x", got, payload)
		}
	}
}

func TestMigrateIdempotentAndCustomTable(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	cfg := &outbox.Config{Table: "app.Events"}
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA app`); err != nil {
		t.Fatal(err)
	}
	applied, err := outbox.Migrate(ctx, db.Pool, cfg.Table)
	if err != nil || fmt.Sprint(applied) != "[1 2 3]" {
		t.Fatalf("first Migrate: %v %v, want [1 2 3]", applied, err)
	}
	// The ID default and the bookkeeping live in the table's schema.
	var fn, book, public bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regprocedure('app.pgoutbox_uuidv7()') IS NOT NULL,
		to_regclass('app.pgoutbox_migration') IS NOT NULL, to_regclass('public.pgoutbox_migration') IS NOT NULL`).Scan(&fn, &book, &public); err != nil {
		t.Fatal(err)
	}
	if !fn || !book || public {
		t.Fatalf("app.pgoutbox_uuidv7 %v, app.pgoutbox_migration %v, public.pgoutbox_migration %v", fn, book, public)
	}
	// Migration 002: the relay's state table, in the outbox's schema.
	var state bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('app.pgoutbox_relay_state') IS NOT NULL`).Scan(&state); err != nil || !state {
		t.Fatalf("app.pgoutbox_relay_state exists: %v (%v)", state, err)
	}
	applied, err = outbox.Migrate(ctx, db.Pool, cfg.Table)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v (%v), want nothing", applied, err)
	}
	var idx string
	if err := db.Pool.QueryRow(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = 'app' AND tablename = 'Events' AND indexname LIKE '%created_at%'`).Scan(&idx); err != nil || idx != "Events_created_at_idx" {
		t.Fatalf("index %q (%v)", idx, err)
	}
	w, _ := outbox.NewWriter(cfg)
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`1`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRollbackWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.writer.InsertTx(ctx, tx, outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM public.outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after rollback (%v)", n, err)
	}
}
