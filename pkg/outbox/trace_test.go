package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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

// With a tracer provider, each message written gets a "create" span (kind
// PRODUCER, a child of the caller's span, by OpenTelemetry's messaging
// conventions), and the headers carry that span's context, which the relay
// passes on; a message with its own traceparent gets no span and keeps it;
// a message the writer refuses ends its span with the error.
func TestWriterRecordsCreateSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	forDrivers(t, &outbox.Config{Propagator: propagation.TraceContext{}, TracerProvider: tp}, func(t *testing.T, b *bundle) {
		ctx, parent := tp.Tracer("test").Start(context.Background(), "handle request")
		defer parent.End()
		own := map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}
		msg := func(key, topic string, h map[string]string) outbox.Message {
			return outbox.Message{AggregateType: "payment", AggregateID: "p-1", EventType: "payment.requested",
				BusinessKey: key, Topic: topic, Payload: []byte(`{}`), Headers: h}
		}
		var ids []uuid.UUID
		err := b.inTx(ctx, func(w txWriter) error {
			id, err := w.Insert(msg("k-1", "payments", nil))
			if err != nil {
				return err
			}
			many, err := w.InsertMany([]outbox.Message{msg("k-2", "", nil), msg("k-3", "", own)})
			if err != nil {
				return err
			}
			emitted, err := w.Emit(msg("k-4", "", nil))
			ids = append(append([]uuid.UUID{id}, many...), emitted)
			if err != nil {
				return err
			}
			bad := msg("k-5", "", nil)
			bad.Payload = []byte(`not json`)
			if _, err := w.Insert(bad); err == nil {
				return errors.New("a payload that is not JSON was written")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		spans := map[string]sdktrace.ReadOnlySpan{} // message ID → its create span
		var refused []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				continue // another driver's subtest
			}
			id := ""
			for _, a := range s.Attributes() {
				if a.Key == "messaging.message.id" {
					id = a.Value.AsString()
				}
			}
			if s.Status().Code == codes.Error {
				refused = append(refused, s)
				continue
			}
			if s.SpanKind() != trace.SpanKindProducer {
				t.Errorf("span %s of kind %v, want producer", s.Name(), s.SpanKind())
			}
			spans[id] = s
		}
		if len(spans) != 3 || len(refused) != 1 {
			t.Fatalf("%d create spans and %d refused, want 3 (not for the message with its own traceparent) and 1", len(spans), len(refused))
		}
		if s := spans[ids[0].String()]; s == nil || s.Name() != "create payments" {
			t.Errorf("InsertTx's span: %v, want create payments", s)
		}
		for i, id := range ids {
			var h map[string]string
			if i == 3 {
				continue // EmitTx writes no row: its span is checked below
			}
			if err := json.Unmarshal(readRow(t, b.db, "public.outbox", id).Headers, &h); err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				if h["traceparent"] != own["traceparent"] {
					t.Errorf("a traceparent the caller set was replaced: %v", h)
				}
				continue
			}
			s := spans[id.String()]
			if s == nil {
				t.Fatalf("no create span for message %d", i)
			}
			want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
			if h["traceparent"] != want || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("message %d: traceparent %s, want its create span's context %s in the caller's trace", i, h["traceparent"], want)
			}
		}
		if spans[ids[3].String()] == nil {
			t.Error("EmitTx recorded no create span")
		}
	})
}
