package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// The writer injects the caller's trace context into each message's
// headers, in every operation and on both drivers, keeps a traceparent the
// caller set, and leaves the caller's map alone.
func TestWriterInjectsTraceContext(t *testing.T) {
	forDrivers(t, &outbox.Config{Propagator: propagation.TraceContext{}}, func(t *testing.T, b *bundle) {
		slot := emitSlot(t, b, "s_trace")
		ctx, want := tracedContext()
		own := map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01", "x": "y"}
		plain := map[string]string{"correlation-id": "c-1"}
		msg := func(key string, h map[string]string) outbox.Message {
			return outbox.Message{AggregateType: "payment", AggregateID: "p-1", EventType: "payment.requested",
				BusinessKey: key, Payload: []byte(`{}`), Headers: h}
		}
		var ids []uuid.UUID
		err := b.inTx(ctx, func(w txWriter) error {
			id, err := w.Insert(msg("k-1", nil))
			if err != nil {
				return err
			}
			many, err := w.InsertMany([]outbox.Message{msg("k-2", plain), msg("k-3", own)})
			ids = append([]uuid.UUID{id}, many...)
			if err != nil {
				return err
			}
			_, err = w.Emit(msg("k-4", plain))
			return err
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
			t.Errorf("InsertTx headers %v, want traceparent %s", h, want)
		}
		if h := headers(ids[1]); h["traceparent"] != want || h["correlation-id"] != "c-1" {
			t.Errorf("InsertManyTx headers %v", h)
		}
		if h := headers(ids[2]); h["traceparent"] != own["traceparent"] {
			t.Errorf("a traceparent the caller set was replaced: %v", h)
		}
		if msgs := emitted(t, b, slot); len(msgs) != 1 || msgs[0].Headers["traceparent"] != want || msgs[0].Headers["correlation-id"] != "c-1" {
			t.Errorf("EmitTx emitted %+v, want one message with traceparent %s", msgs, want)
		}
		if len(plain) != 1 {
			t.Errorf("the caller's header map was changed: %v", plain)
		}
	})
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
