package inbox

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// Trace context headers (W3C Trace Context), written by the outbox writer and
// read by the consumer loop.
const (
	HeaderTraceparent = contract.HeaderTraceparent
	HeaderTracestate  = contract.HeaderTracestate
)

// tracerName is the instrumentation scope of the inbox's spans.
const tracerName = "github.com/pgoutbox/pgoutbox/pkg/inbox"

// headerCarrier adapts Message.Headers to a propagation.TextMapCarrier.
type headerCarrier map[string]string

func (h headerCarrier) Get(key string) string { return h[key] }
func (h headerCarrier) Set(key, value string) { h[key] = value }
func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// startDelivery extracts the message's creation context (the writer's
// create span) from msg's headers and starts the span of one delivery
// (messaging semantic conventions, operation "process", kind CONSUMER),
// linked to it and, unless Config.TraceLinkOnly, its child. end records
// the outcome and ends it.
func (in *core) startDelivery(ctx context.Context, tracer trace.Tracer, group string, msg *Message) (context.Context, func(Result, error)) {
	cfg := &in.cfg
	created := cfg.Propagator.Extract(context.Background(), headerCarrier(msg.Headers))
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if link := trace.LinkFromContext(created); link.SpanContext.IsValid() {
		opts = append(opts, trace.WithLinks(link))
	}
	if !cfg.TraceLinkOnly {
		ctx = cfg.Propagator.Extract(ctx, headerCarrier(msg.Headers))
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", msg.Topic),
		attribute.String("messaging.destination.partition.id", strconv.Itoa(msg.Partition)),
		attribute.Int64("messaging.kafka.offset", msg.Offset),
		attribute.String("messaging.consumer.group.name", group),
		attribute.String("messaging.message.id", msg.ID),
		attribute.String("pgoutbox.inbox.consumer", cfg.Consumer),
	}
	if cfg.TraceBusinessKey {
		attrs = append(attrs, attribute.String("pgoutbox.inbox.business_key", msg.BusinessKey))
	}
	ctx, span := tracer.Start(ctx, "process "+msg.Topic, append(opts, trace.WithAttributes(attrs...))...)
	return ctx, func(res Result, err error) {
		if res.Outcome != 0 {
			span.SetAttributes(
				attribute.String("pgoutbox.inbox.outcome", res.Outcome.String()),
				attribute.Int("pgoutbox.inbox.attempts", res.Attempts))
			if res.ResultRef != "" {
				span.SetAttributes(attribute.String("pgoutbox.inbox.result_ref", res.ResultRef))
			}
			if res.Reason != "" {
				span.SetAttributes(attribute.String("pgoutbox.inbox.reason", res.Reason))
			}
		}
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case res.Err != nil && res.Outcome != Duplicate:
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
		span.End()
	}
}

// startSettle starts the span of one offset commit of the consumer loop in
// group (messaging semantic conventions: operation type "settle", name
// "commit", kind CLIENT), of the marked offsets of partitions partitions
// of topics. end records err and ends it.
func (in *core) startSettle(ctx context.Context, tracer trace.Tracer, group string, topics []string, partitions int) (context.Context, func(error)) {
	name := "commit"
	if len(topics) == 1 {
		name += " " + topics[0]
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "settle"),
		attribute.String("messaging.operation.name", "commit"),
		attribute.String("messaging.consumer.group.name", group),
		attribute.String("pgoutbox.inbox.consumer", in.cfg.Consumer),
		attribute.Int("pgoutbox.inbox.partitions", partitions),
	}
	if len(topics) == 1 {
		attrs = append(attrs, attribute.String("messaging.destination.name", topics[0]))
	}
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// tracingDefaults fills the tracing fields of cfg from the OpenTelemetry
// globals.
func tracingDefaults(cfg *Config) {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = otel.GetTextMapPropagator()
	}
}

var _ propagation.TextMapCarrier = headerCarrier(nil)
