package relayotel

import (
	"context"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// ScopeName is the instrumentation scope of the relay's spans.
const ScopeName = "github.com/pgoutbox/pgoutbox/pkg/relay"

// Config configures a Tracer.
type Config struct {
	// TracerProvider makes the tracer. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator reads each record's creation context from its headers.
	// Defaults to propagation.TraceContext{} (W3C traceparent and
	// tracestate, the headers the outbox writer stores).
	Propagator propagation.TextMapPropagator
	// LinkOnly makes a write of a single record link to its creation
	// context without being its child. Defaults to false.
	LinkOnly bool
}

// Tracer is a relay hook (put it in relay.Config.Hooks) that records a
// "send" span per Kafka write. Build it with New.
type Tracer struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	linkOnly bool
}

// New returns a Tracer of cfg (nil: the defaults).
func New(cfg *Config) *Tracer {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	return &Tracer{tracer: c.TracerProvider.Tracer(ScopeName), prop: c.Propagator, linkOnly: c.LinkOnly}
}

// OnBatchWritten records the span of one Kafka write.
func (t *Tracer) OnBatchWritten(w relayhook.BatchWritten) {
	recs := w.Records
	if len(recs) == 0 {
		return
	}
	first := recs[0]
	topic, partition := first.Topic(), first.Partition()
	oneTopic, onePartition := true, true
	oldest := first.Commit()
	for _, r := range recs[1:] {
		if r.Topic() != topic {
			oneTopic = false
		}
		if r.Partition() != partition {
			onePartition = false
		}
		if c := r.Commit(); c.Before(oldest) {
			oldest = c
		}
	}
	name := "send"
	if oneTopic {
		name = "send " + topic
	}
	ctx := contextFor(t, recs)
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(w.Start))
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(w.End))
		return
	}
	last := recs[len(recs)-1]
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.Int("messaging.batch.message_count", len(recs)),
		attribute.String("pgoutbox.commit_lsn", LSN(last.CommitLSN())),
		attribute.Float64("pgoutbox.outbox.lag", w.Start.Sub(oldest).Seconds()),
	}
	if oneTopic {
		attrs = append(attrs, attribute.String("messaging.destination.name", topic))
	}
	if onePartition && w.Err == nil {
		attrs = append(attrs, attribute.String("messaging.destination.partition.id", strconv.Itoa(int(partition))))
	}
	if len(recs) == 1 {
		attrs = append(attrs, attribute.String("messaging.kafka.message.key", string(first.Key())),
			attribute.String("messaging.message.id", first.MessageID()))
		if w.Err == nil {
			attrs = append(attrs, attribute.Int64("messaging.kafka.offset", first.Offset()))
		}
	}
	if w.Transactional {
		attrs = append(attrs, attribute.Bool("pgoutbox.kafka.transactional", true))
	}
	span.SetAttributes(attrs...)
	for i, r := range recs {
		sc := trace.SpanContextFromContext(t.prop.Extract(context.Background(), carrier{r}))
		if !sc.IsValid() {
			continue // no creation context
		}
		la := []attribute.KeyValue{attribute.String("messaging.message.id", r.MessageID())}
		if acknowledged := w.Err == nil || i < len(w.Errs) && w.Errs[i] == nil; acknowledged {
			la = append(la, attribute.String("messaging.destination.partition.id", strconv.Itoa(int(r.Partition()))),
				attribute.Int64("messaging.kafka.offset", r.Offset()))
		}
		span.AddLink(trace.Link{SpanContext: sc, Attributes: la})
	}
	if w.Err != nil {
		span.RecordError(w.Err)
		span.SetStatus(codes.Error, w.Err.Error())
	}
	span.End(trace.WithTimestamp(w.End))
}

// contextFor is the parent context of a write of recs: the creation
// context of a single record (unless LinkOnly), else none.
func contextFor(t *Tracer, recs []relayhook.Record) context.Context {
	ctx := context.Background()
	if len(recs) != 1 || t.linkOnly {
		return ctx
	}
	return t.prop.Extract(ctx, carrier{recs[0]})
}

// LSN formats a WAL position as Postgres does ("16/B374D848").
func LSN(pos uint64) string { return fmt.Sprintf("%X/%X", pos>>32, uint32(pos)) }

// carrier reads a record's headers as a propagation.TextMapCarrier.
type carrier struct{ r relayhook.Record }

func (c carrier) Get(key string) string {
	v, _ := c.r.Header(key)
	return string(v)
}

// Set does nothing: the relay never changes a record's headers.
func (carrier) Set(string, string) {}

func (c carrier) Keys() []string {
	var keys []string
	for k := range c.r.Headers() {
		keys = append(keys, k)
	}
	return keys
}

var (
	_ relayhook.HookBatchWritten = (*Tracer)(nil)
	_ propagation.TextMapCarrier = carrier{}
)
