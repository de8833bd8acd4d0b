package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// One trace from the producer to the effect: the outbox writer records a
// create span under the producer's span and injects its context into the
// row's headers, the relay passes them through Kafka (kfake), and the inbox
// consumer runs the delivery in a span whose parent is the create span and
// which links to it; the handler's context carries it; the offset commit
// is a settle span. kcat, reading the topic independently, sees the
// traceparent header.
func TestTraceFromProducerToInbox(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	prop := propagation.TraceContext{}
	db := testenv.NewDB(t)
	k := testenv.NewBroker(t)
	ctx := context.Background()

	cfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Slot: db.Name + "_trace", Publication: "pub_trace",
		TopicTemplate:  k.Topic(relaytype.DefaultTopicTemplate),
		StatusInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(ctx, t, r.Run)

	// The producer: a span around the business transaction.
	w, err := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Propagator: prop, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	pctx, producerSpan := tp.Tracer("producer").Start(ctx, "create payment")
	err = pgx.BeginFunc(pctx, db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(pctx, tx, outbox.Message{AggregateType: "payment", AggregateID: "p-1",
			EventType: "payment.requested", BusinessKey: "pay-1", Payload: []byte(`{"amount_cents":100}`)})
		return err
	})
	producerSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	var want trace.SpanContext // the create span's
	for _, s := range exporter.GetSpans() {
		if s.SpanKind == trace.SpanKindProducer && s.Name == "create" && s.Parent.SpanID() == producerSpan.SpanContext().SpanID() {
			want = s.SpanContext
		}
	}
	if !want.IsValid() {
		t.Fatalf("no create span under the producer's span among %v", exporter.GetSpans())
	}
	recs := testenv.WaitForRecords(t, k.Brokers, k.Topic("outbox.payment"), 1, time.Minute)
	if tp, _ := recs[0].Header("traceparent"); tp != "00-"+want.TraceID().String()+"-"+want.SpanID().String()+"-01" {
		t.Fatalf("traceparent header in Kafka %q, want the create span's", tp)
	}

	// The consumer.
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "trace", TracerProvider: tp, Propagator: prop, TraceBusinessKey: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan trace.SpanContext, 1)
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{Brokers: k.Brokers, GroupID: k.Topic("trace"), Topics: []string{k.Topic("outbox.payment")},
		Inbox: in, Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			select {
			case handled <- trace.SpanContextFromContext(ctx):
			default:
			}
			return "ref-1", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := testenv.Go(ctx, t, c.Run)
	var inHandler trace.SpanContext
	select {
	case inHandler = <-handled:
	case <-time.After(time.Minute):
		t.Fatal("the consumer did not handle the message within a minute")
	}
	if err := stopConsumer(); err != nil {
		t.Fatal(err)
	}

	var delivery, settle *tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		switch s.SpanKind {
		case trace.SpanKindConsumer:
			delivery = &s
		case trace.SpanKindClient:
			settle = &s
		}
	}
	if settle == nil || !strings.HasPrefix(settle.Name, "commit") {
		t.Errorf("no settle span of the offset commit: %v", settle)
	}
	if delivery == nil {
		t.Fatalf("no consumer span among %d spans", len(exporter.GetSpans()))
	}
	if delivery.SpanContext.TraceID() != want.TraceID() || delivery.Parent.SpanID() != want.SpanID() {
		t.Fatalf("delivery span trace %s parent %s; want trace %s parent %s", delivery.SpanContext.TraceID(),
			delivery.Parent.SpanID(), want.TraceID(), want.SpanID())
	}
	if len(delivery.Links) != 1 || delivery.Links[0].SpanContext.SpanID() != want.SpanID() {
		t.Errorf("delivery span links %v, want one to the create span %s", delivery.Links, want.SpanID())
	}
	if inHandler.SpanID() != delivery.SpanContext.SpanID() {
		t.Fatalf("the handler's context carries span %s, want the delivery span %s", inHandler.SpanID(), delivery.SpanContext.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range delivery.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"messaging.system": "kafka", "messaging.destination.name": k.Topic("outbox.payment"),
		"pgoutbox.inbox.outcome":  "processed",
		"pgoutbox.inbox.attempts": "1", "pgoutbox.inbox.result_ref": "ref-1", "pgoutbox.inbox.business_key": "pay-1"} {
		if attrs[k] != v {
			t.Errorf("span attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
	if !strings.Contains(logs.String(), "trace_id="+want.TraceID().String()) {
		t.Errorf("no log record of the delivery carries trace_id %s:\n%s", want.TraceID(), logs.String())
	}
	for _, k := range []string{"messaging.message.id", "messaging.destination.partition.id", "messaging.kafka.offset"} {
		if attrs[k] == "" {
			t.Errorf("no %s attribute: %v", k, attrs)
		}
	}
}
