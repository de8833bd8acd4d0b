package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// The writer injects the caller's trace context into each row's headers,
// keeps a traceparent the caller set, and leaves the caller's map alone.
func TestWriterInjectsTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t, &outbox.Config{Propagator: propagation.TraceContext{}})
	ctx, want := tracedContext()

	own := map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01", "x": "y"}
	plain := map[string]string{"correlation-id": "c-1"}
	msg := func(key string, h map[string]string) outbox.Message {
		return outbox.Message{AggregateType: "payment", AggregateID: "p-1", EventType: "payment.requested",
			BusinessKey: key, Payload: []byte(`{}`), Headers: h}
	}
	ids, err := inTx(t, b.db, func(tx pgx.Tx) ([]uuid.UUID, error) {
		id, err := b.writer.InsertTx(ctx, tx, msg("k-1", nil))
		if err != nil {
			return nil, err
		}
		many, err := b.writer.InsertManyTx(ctx, tx, []outbox.Message{msg("k-2", plain), msg("k-3", own)})
		return append([]uuid.UUID{id}, many...), err
	})
	if err != nil {
		t.Fatal(err)
	}
	headers := func(id uuid.UUID) map[string]string {
		var h map[string]string
		if err := json.Unmarshal(readRow(t, b.db, "public.outbox", id).Headers, &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := headers(ids[0]); h["traceparent"] != want {
		t.Fatalf("InsertTx headers %v, want traceparent %s", h, want)
	}
	if h := headers(ids[1]); h["traceparent"] != want || h["correlation-id"] != "c-1" {
		t.Fatalf("InsertManyTx headers %v", h)
	}
	if h := headers(ids[2]); h["traceparent"] != own["traceparent"] {
		t.Fatalf("a traceparent the caller set was replaced: %v", h)
	}
	if len(plain) != 1 {
		t.Fatalf("the caller's header map was changed: %v", plain)
	}
}

// The database/sql twins inject the trace context as the pgx methods do:
// InsertSQLTx, InsertManySQLTx (keeping a traceparent the caller set) and
// EmitSQLTx.
func TestSQLWriterInjectsTraceContext(t *testing.T) {
	t.Parallel()
	b := setup(t, &outbox.Config{Propagator: propagation.TraceContext{}})
	emitSlot(t, b, "s_trace_sql")
	ctx, want := tracedContext()
	own := map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}
	msg := func(key string, h map[string]string) outbox.Message {
		return outbox.Message{AggregateType: "payment", AggregateID: "p-1", EventType: "payment.requested",
			BusinessKey: key, Payload: []byte(`{}`), Headers: h}
	}
	db := b.db.SQL
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.writer.InsertSQLTx(ctx, tx, msg("k-1", nil))
	if err != nil {
		t.Fatal(err)
	}
	many, err := b.writer.InsertManySQLTx(ctx, tx, []outbox.Message{msg("k-2", nil), msg("k-3", own)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.writer.EmitSQLTx(ctx, tx, msg("k-4", nil)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, id := range append([]uuid.UUID{id}, many...) {
		var h map[string]string
		if raw := readRow(t, b.db, "public.outbox", id).Headers; raw != nil { // NULL: no headers
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
		}
		wantHere := want
		if i == 2 { // the caller's own
			wantHere = own["traceparent"]
		}
		if h["traceparent"] != wantHere {
			t.Errorf("row %d headers %v, want traceparent %s", i, h, wantHere)
		}
	}
	if msgs := emitted(t, b, "s_trace_sql"); len(msgs) != 1 || msgs[0].Headers["traceparent"] != want {
		t.Errorf("EmitSQLTx emitted %+v, want one message with traceparent %s", msgs, want)
	}
}

// tracedContext returns a context carrying a sampled span, and the W3C
// traceparent that stands for it.
func tracedContext() (context.Context, string) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}
