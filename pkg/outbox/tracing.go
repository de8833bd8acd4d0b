package outbox

import (
	"context"

	"github.com/google/uuid"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// tracerName is the instrumentation scope of the writer's spans.
const tracerName = "github.com/pgoutbox/pgoutbox/pkg/outbox"

// create starts the "create" span of m (OpenTelemetry's messaging
// conventions: kind PRODUCER, one per message) as a child of ctx's span
// and injects its context into m's headers (a copy of them), which the
// relay passes on byte for byte: the message's creation context. A
// message that carries a traceparent already keeps it, and gets no span:
// the caller chose its creation context. end records err and ends the
// span, once the row or message is written or refused; call it after
// prepare filled in the message ID.
//
// Without a tracer provider (the default: otel's global no-op) the span
// is not recording and carries ctx's context unchanged, so the headers
// hold the caller's context as before.
func (w *Writer[TTx]) create(ctx context.Context, m *Message) (end func(err error)) {
	if _, ok := m.Headers[contract.HeaderTraceparent]; ok {
		return endNothing
	}
	name := "create"
	if m.Topic != "" {
		name += " " + m.Topic
	}
	ctx, span := w.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "create"),
			attribute.String("messaging.operation.name", "create"),
			attribute.String("messaging.kafka.message.key", m.AggregateID),
			attribute.String("pgoutbox.aggregate_type", m.AggregateType),
			attribute.String("pgoutbox.event_type", m.EventType),
			attribute.String("pgoutbox.outbox.table", w.table.String()),
		}
		if m.Topic != "" {
			attrs = append(attrs, attribute.String("messaging.destination.name", m.Topic))
		}
		span.SetAttributes(attrs...)
	}
	carrier := propagation.MapCarrier{}
	w.propagator.Inject(ctx, carrier)
	if len(carrier) > 0 {
		headers := make(map[string]string, len(m.Headers)+len(carrier))
		for k, v := range m.Headers {
			headers[k] = v
		}
		for k, v := range carrier {
			if _, set := headers[k]; !set {
				headers[k] = v
			}
		}
		m.Headers = headers
	}
	if !span.IsRecording() {
		return endNothing // a no-op span: nothing to end, no closure to allocate
	}
	return func(err error) {
		if m.ID != uuid.Nil {
			span.SetAttributes(attribute.String("messaging.message.id", m.ID.String()))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// endNothing is the end of a message without a recording create span.
func endNothing(error) {}
