package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

func TestMain(m *testing.M) { testenv.MainWithDatabase(m) }

// bundle is the fresh database of one test, migrated, and the writer
// driver the test runs on.
type bundle struct {
	db  *testenv.DB
	d   driver
	cfg *outbox.Config
}

// txWriter is a Writer bound to one open transaction of its driver: the
// three writer operations, whatever the driver.
type txWriter interface {
	Insert(msg outbox.Message) (uuid.UUID, error)
	InsertMany(msgs []outbox.Message) ([]uuid.UUID, error)
	Emit(msg outbox.Message) (uuid.UUID, error)
}

// driver is one of the writer's two drivers as the tests use it.
type driver struct {
	name string
	// inTx opens a transaction on db and runs fn with a Writer for cfg
	// bound to it; it commits when fn returns nil and commit is set, and
	// rolls back otherwise.
	inTx    func(ctx context.Context, db *testenv.DB, cfg *outbox.Config, commit bool, fn func(w txWriter) error) error
	migrate func(ctx context.Context, db *testenv.DB, table string) ([]int, error)
}

// drivers are the writer's drivers: every test of the writer's operations
// runs once on each (forDrivers).
var drivers = []driver{
	driverOf("pgx", func(db *testenv.DB) *outbox.Driver[pgx.Tx] { return outbox.Pgx(db.Pool) },
		func(ctx context.Context, db *testenv.DB) (pgx.Tx, func(commit bool) error, error) {
			tx, err := db.Pool.Begin(ctx)
			return tx, func(commit bool) error {
				if commit {
					return tx.Commit(ctx)
				}
				return tx.Rollback(ctx)
			}, err
		}),
	driverOf("database/sql", func(db *testenv.DB) *outbox.Driver[*sql.Tx] { return outbox.SQL(db.SQL) },
		func(ctx context.Context, db *testenv.DB) (*sql.Tx, func(commit bool) error, error) {
			tx, err := db.SQL.BeginTx(ctx, nil)
			return tx, func(commit bool) error {
				if commit {
					return tx.Commit()
				}
				return tx.Rollback()
			}, err
		}),
}

// driverOf is the driver of the tests for one outbox driver: newDriver
// builds it on a test database, begin opens a transaction of its type.
func driverOf[TTx any](name string, newDriver func(*testenv.DB) *outbox.Driver[TTx],
	begin func(ctx context.Context, db *testenv.DB) (TTx, func(commit bool) error, error)) driver {
	return driver{
		name: name,
		inTx: func(ctx context.Context, db *testenv.DB, cfg *outbox.Config, commit bool, fn func(w txWriter) error) error {
			w, err := outbox.NewWriter(newDriver(db), cfg)
			if err != nil {
				return err
			}
			tx, end, err := begin(ctx, db)
			if err != nil {
				return err
			}
			if err := fn(bound[TTx]{ctx: ctx, w: w, tx: tx}); err != nil {
				_ = end(false)
				return err
			}
			return end(commit)
		},
		migrate: func(ctx context.Context, db *testenv.DB, table string) ([]int, error) {
			return outbox.Migrate(ctx, newDriver(db), table)
		},
	}
}

// bound is a txWriter.
type bound[TTx any] struct {
	ctx context.Context
	w   *outbox.Writer[TTx]
	tx  TTx
}

func (b bound[TTx]) Insert(m outbox.Message) (uuid.UUID, error) { return b.w.InsertTx(b.ctx, b.tx, m) }
func (b bound[TTx]) Emit(m outbox.Message) (uuid.UUID, error)   { return b.w.EmitTx(b.ctx, b.tx, m) }
func (b bound[TTx]) InsertMany(ms []outbox.Message) ([]uuid.UUID, error) {
	return b.w.InsertManyTx(b.ctx, b.tx, ms)
}

// forDrivers runs test once per driver, in parallel, each on a fresh
// database migrated for cfg's table (unless cfg.Table is "-": no table).
func forDrivers(t *testing.T, cfg *outbox.Config, test func(t *testing.T, b *bundle)) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			test(t, setup(t, d, cfg))
		})
	}
}

func setup(t *testing.T, d driver, cfg *outbox.Config) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	b := &bundle{db: db, d: d, cfg: cfg}
	if cfg != nil && cfg.Table == "-" {
		b.cfg = nil
		return b
	}
	var table string
	if cfg != nil {
		table = cfg.Table
	}
	if _, err := d.migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return b
}

// inTx runs fn in a transaction of b's driver, committed when fn returns
// nil.
func (b *bundle) inTx(ctx context.Context, fn func(w txWriter) error) error {
	return b.d.inTx(ctx, b.db, b.cfg, true, fn)
}

// rolledBack runs fn in a transaction of b's driver and rolls it back.
func (b *bundle) rolledBack(ctx context.Context, fn func(w txWriter) error) error {
	return b.d.inTx(ctx, b.db, b.cfg, false, fn)
}

// count returns the rows of table.
func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
	forDrivers(t, nil, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		// jsonb prints in its own canonical form; this payload is already in
		// it, so the stored bytes must equal the input exactly. Non-ASCII
		// included.
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
		var id uuid.UUID
		err := b.inTx(ctx, func(w txWriter) (err error) {
			id, err = w.Insert(msg)
			return err
		})
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
	})
}

func TestInsertTxKeepsGivenIDAndNulls(t *testing.T) {
	forDrivers(t, nil, func(t *testing.T, b *bundle) {
		want := uuid.MustParse("0190f0e0-0000-7000-8000-000000000001")
		var id uuid.UUID
		err := b.inTx(context.Background(), func(w txWriter) (err error) {
			id, err = w.Insert(outbox.Message{ID: want, AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{}`)})
			return err
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
	})
}

// A batch of 9000 messages: COPY on pgx, several multi-row INSERTs under
// Postgres' 65535 parameters on database/sql; IDs in order, given ones
// kept.
func TestInsertManyTx(t *testing.T) {
	forDrivers(t, nil, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		given := uuid.MustParse("0190a5b4-0000-7000-8000-000000000001")
		msgs := make([]outbox.Message, 9000)
		for i := range msgs {
			msgs[i] = outbox.Message{
				AggregateType: "order",
				AggregateID:   fmt.Sprintf("order-%d", i%37),
				EventType:     "order.created",
				BusinessKey:   fmt.Sprintf("bk-%d", i),
				Payload:       []byte(fmt.Sprintf(`{"n": %d}`, i)),
			}
		}
		msgs[1].ID = given
		msgs[2].Headers, msgs[2].Topic = map[string]string{"x": "y"}, "orders.v2"
		var ids []uuid.UUID
		err := b.inTx(ctx, func(w txWriter) (err error) {
			ids, err = w.InsertMany(msgs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(msgs) || ids[1] != given {
			t.Fatalf("%d IDs, second %s", len(ids), ids[1])
		}
		seen := map[uuid.UUID]bool{}
		for i, id := range ids {
			if seen[id] || id == uuid.Nil {
				t.Fatalf("ID %d (%s) duplicate or nil", i, id)
			}
			seen[id] = true
		}
		if n := b.count(t, "public.outbox"); n != len(msgs) {
			t.Fatalf("count %d, want %d", n, len(msgs))
		}
		got := readRow(t, b.db, "public.outbox", ids[8999])
		if string(got.Payload) != `{"n": 8999}` || got.BusinessKey != "bk-8999" || got.AggregateID != "order-8" || got.Headers != nil || got.Topic != nil {
			t.Fatalf("row 8999: %+v", got)
		}
		if got := readRow(t, b.db, "public.outbox", ids[2]); string(got.Headers) != `{"x": "y"}` || got.Topic == nil || *got.Topic != "orders.v2" {
			t.Fatalf("row 2: %+v headers %s", got, got.Headers)
		}
		if err := b.inTx(ctx, func(w txWriter) error {
			ids, err := w.InsertMany(nil)
			if len(ids) != 0 {
				t.Errorf("InsertManyTx(nil) returned %v", ids)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestValidation(t *testing.T) {
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
		{"progress topic", func(m *outbox.Message) { m.Topic = "pgoutbox.progress" },
			"invalid outbox message: topic pgoutbox.progress is the progress topic of exactly-once relays, which only the relay writes (the relay would dead-letter the message as bad-topic)"},
		{"fleet topic", func(m *outbox.Message) { m.Topic = "pgoutbox.fleet.orders" },
			"invalid outbox message: topic pgoutbox.fleet.orders is a relay fleet's topic, which only relays use (the relay would dead-letter the message as bad-topic)"},
		{"nil payload", func(m *outbox.Message) { m.Payload = nil }, "invalid outbox message: payload is required"},
		{"bad json", func(m *outbox.Message) { m.Payload = []byte(`{"x":`) }, "invalid outbox message: payload is not valid JSON (set Config.RawPayload for a text or bytea payload column)"},
	}
	forDrivers(t, nil, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		for _, tt := range tests {
			m := valid
			tt.modify(&m)
			wantBatch := "invalid outbox message: message 1: " + tt.want[len("invalid outbox message: "):]
			for op, call := range map[string]struct {
				run  func(w txWriter) error
				want string
			}{
				"InsertTx":     {func(w txWriter) error { _, err := w.Insert(m); return err }, tt.want},
				"InsertManyTx": {func(w txWriter) error { _, err := w.InsertMany([]outbox.Message{valid, m}); return err }, wantBatch},
				"EmitTx":       {func(w txWriter) error { _, err := w.Emit(m); return err }, tt.want},
			} {
				err, want := b.inTx(ctx, call.run), call.want
				if !errors.Is(err, outbox.ErrInvalidMessage) || err.Error() != want {
					t.Errorf("%s, %s: got %v, want %q", tt.name, op, err, want)
				}
			}
		}
		if n := b.count(t, "public.outbox"); n != 0 {
			t.Fatalf("invalid messages wrote %d rows", n)
		}
	})
}

func TestRawPayloadByteaTable(t *testing.T) {
	forDrivers(t, &outbox.Config{Table: "-"}, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		if _, err := b.db.Pool.Exec(ctx, `CREATE SCHEMA billing; CREATE TABLE billing.events (
			id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
			business_key text NOT NULL, payload bytea NOT NULL, headers jsonb, topic text, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			t.Fatal(err)
		}
		b.cfg = &outbox.Config{Table: "billing.events", RawPayload: true}
		payload := []byte{0x00, 0xff, 0xfe, '\n', 'x', 0x80}
		var ids []uuid.UUID
		err := b.inTx(ctx, func(w txWriter) error {
			id, err := w.Insert(outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k1", Payload: payload})
			ids = append(ids, id)
			if err != nil {
				return err
			}
			more, err := w.InsertMany([]outbox.Message{{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k2", Payload: payload}})
			ids = append(ids, more...)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			var got []byte
			if err := b.db.Pool.QueryRow(ctx, `SELECT payload FROM billing.events WHERE id = $1`, id).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("payload %x, want %x", got, payload)
			}
		}
	})
}

// Migrate runs on both drivers: the same tables, functions and bookkeeping.
func TestMigrateIdempotentAndCustomTable(t *testing.T) {
	forDrivers(t, &outbox.Config{Table: "-"}, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		db := b.db
		cfg := &outbox.Config{Table: "app.Events"}
		if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA app`); err != nil {
			t.Fatal(err)
		}
		applied, err := b.d.migrate(ctx, db, cfg.Table)
		if err != nil || fmt.Sprint(applied) != "[1 2 3 4]" {
			t.Fatalf("first Migrate: %v %v, want [1 2 3 4]", applied, err)
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
		// Migrations 002 and 004: the relay's state table, in the
		// outbox's schema, with its incarnation column.
		var state bool
		if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
			WHERE attrelid = to_regclass('app.pgoutbox_relay_state') AND attname = 'incarnation')`).Scan(&state); err != nil || !state {
			t.Fatalf("app.pgoutbox_relay_state.incarnation exists: %v (%v)", state, err)
		}
		applied, err = b.d.migrate(ctx, db, cfg.Table)
		if err != nil || len(applied) != 0 {
			t.Fatalf("second Migrate applied %v (%v), want nothing", applied, err)
		}
		var idx string
		if err := db.Pool.QueryRow(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = 'app' AND tablename = 'Events' AND indexname LIKE '%created_at%'`).Scan(&idx); err != nil || idx != "Events_created_at_idx" {
			t.Fatalf("index %q (%v)", idx, err)
		}
		b.cfg = cfg
		if err := b.inTx(ctx, func(w txWriter) error {
			_, err := w.Insert(outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`1`)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// A rolled-back transaction writes nothing, whichever operation wrote in
// it.
func TestRollbackWritesNothing(t *testing.T) {
	forDrivers(t, nil, func(t *testing.T, b *bundle) {
		m := outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{}`)}
		err := b.rolledBack(context.Background(), func(w txWriter) error {
			if _, err := w.Insert(m); err != nil {
				return err
			}
			_, err := w.InsertMany([]outbox.Message{m, m})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := b.count(t, "public.outbox"); n != 0 {
			t.Fatalf("%d rows after rollback", n)
		}
	})
}

// Nil drivers and transactions are refused with an error, not a panic; a
// driver without a handle serves Writers but not Migrate.
func TestNilArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := outbox.NewWriter[pgx.Tx](nil, nil); err == nil {
		t.Error("NewWriter(nil) succeeded")
	}
	if _, err := outbox.Migrate(ctx, outbox.Pgx(nil), ""); err == nil {
		t.Error("Migrate(Pgx(nil)) succeeded")
	}
	if _, err := outbox.Migrate(ctx, outbox.SQL(nil), ""); err == nil {
		t.Error("Migrate(SQL(nil)) succeeded")
	}
	m := outbox.Message{AggregateType: "a", AggregateID: "1", EventType: "e", BusinessKey: "k", Payload: []byte(`{}`)}
	pw, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := outbox.NewWriter(outbox.SQL(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]txWriter{"pgx": bound[pgx.Tx]{ctx: ctx, w: pw}, "database/sql": bound[*sql.Tx]{ctx: ctx, w: sw}} {
		if _, err := w.Insert(m); err == nil {
			t.Errorf("%s: InsertTx(nil) succeeded", name)
		}
		if _, err := w.InsertMany([]outbox.Message{m}); err == nil {
			t.Errorf("%s: InsertManyTx(nil) succeeded", name)
		}
		if _, err := w.Emit(m); err == nil {
			t.Errorf("%s: EmitTx(nil) succeeded", name)
		}
	}
}

// Migrate on a driver of the caller's pgx transaction runs in a savepoint
// of it: the table comes and goes with the transaction.
func TestMigrateInCallersTx(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if applied, err := outbox.Migrate(ctx, outbox.Pgx(tx), ""); err != nil || len(applied) != 4 {
		t.Fatalf("Migrate in tx: %v, %v", applied, err)
	}
	var in, out bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL`).Scan(&in); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if !in || out {
		t.Fatalf("outbox table in the transaction %v, after its rollback %v", in, out)
	}
}

// The same calls through the two drivers write the same rows, byte for
// byte, and emit the same logical messages: one outbox table per driver,
// the same messages (IDs included) into each.
func TestDriversWriteTheSame(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, drivers[0], nil)
	db := b.db
	slot := emitSlot(t, b, "s_same") // before the writes: the slot sees what commits after it
	id := func(n int) uuid.UUID { return uuid.MustParse(fmt.Sprintf("0190f0e0-0000-7000-8000-%012d", n)) }
	msgs := []outbox.Message{
		{ID: id(1), AggregateType: "payment", AggregateID: "pay-ü", EventType: "e", BusinessKey: "k-1", Payload: []byte(`{"a": [1, 2.5, "x"]}`),
			Headers: map[string]string{"traceparent": "00-abc-01", "x": "ü"}, Topic: "payments.v1"},
		{ID: id(2), AggregateType: "payment", AggregateID: "pay-2", EventType: "e", BusinessKey: "k-2", Payload: []byte(`null`)},
		{ID: id(3), AggregateType: "order", AggregateID: "o", EventType: "e", BusinessKey: "k-3", Payload: []byte(`"s"`), Headers: map[string]string{}},
	}
	tables := make([][]string, len(drivers))
	for i, d := range drivers {
		table := fmt.Sprintf("d%d.outbox", i)
		if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA `+strings.Split(table, ".")[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := d.migrate(ctx, db, table); err != nil {
			t.Fatal(err)
		}
		err := d.inTx(ctx, db, &outbox.Config{Table: table}, true, func(w txWriter) error {
			if _, err := w.Insert(msgs[0]); err != nil {
				return err
			}
			if _, err := w.InsertMany(msgs[1:]); err != nil {
				return err
			}
			_, err := w.Emit(msgs[0])
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		tables[i] = testenv.QueryStrings(ctx, t, db.Pool, `SELECT format('%s|%s|%s|%s|%s|%s|%s|%s', id, aggregate_type, aggregate_id, event_type,
			business_key, payload, coalesce(headers::text, 'NULL'), coalesce(topic, 'NULL')) FROM `+table+` ORDER BY id`)
	}
	if len(tables[0]) != 3 || !slices.Equal(tables[0], tables[1]) {
		t.Fatalf("rows differ:\n%s: %q\n%s: %q", drivers[0].name, tables[0], drivers[1].name, tables[1])
	}
	emitted := emitted(t, b, slot)
	if len(emitted) != 2 || !reflect.DeepEqual(emitted[0], emitted[1]) || !reflect.DeepEqual(emitted[0], msgs[0]) {
		t.Fatalf("emitted %+v, want %+v twice", emitted, msgs[0])
	}
}
