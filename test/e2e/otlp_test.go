package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// otlpSpan is a span an OTLP receiver got, with its service's name.
type otlpSpan struct {
	service string
	*tracepb.Span
}

// attr is the value of the span's attribute key, as text ("" when none).
func (s otlpSpan) attr(key string) string { return otlpAttr(s.Attributes, key) }

func otlpAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue)
		}
	}
	return ""
}

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf encoding, gzip or
// not): what a collector would get.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of protobuf to /v1/traces", http.StatusNotFound)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var export coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &export)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.ResourceSpans {
		service := otlpAttr(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, otlpSpan{service, s})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// named returns the spans received whose name starts with prefix.
func (r *otlpReceiver) named(prefix string) []otlpSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []otlpSpan
	for _, s := range r.spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// provider is a tracer provider of service exporting to r over OTLP/HTTP,
// each span as it ends.
func (r *otlpReceiver) provider(t *testing.T, service string) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// One trace from a producer's request to the consumer's effect, as an
// OpenTelemetry collector receives it over OTLP/HTTP from three services:
// the writer (pkg/outbox: create), the relay binary (relay run --tracing,
// configured by the standard OTEL_* variables only: send) and the
// consumer (pkg/inbox: process, and the settle span of its offset
// commit). The test asserts one trace ID from the producer's span to the
// consumer's; the send span a child of the create span and linked to it;
// the creation context in Kafka byte for byte as the writer stored it;
// the span names, kinds and attributes of the messaging conventions
// (partition and offset as Kafka holds the record, the commit LSN); and a
// second delivery of the record visible on its process span (outcome
// duplicate). Not parallel: the relay binary takes its OTEL_* variables
// from this process's environment.
func TestOTLPTraceFromWriterThroughRelayToInbox(t *testing.T) {
	recv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.srv.URL)
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "")
	bin, db, kafka, logPath := binaryEnv(t)
	ctx := context.Background()
	prop := propagation.TraceContext{}
	topic := kafka.Topic("outbox.payment")

	base := []string{"--database-url", db.URL, "--slot", db.Name + "_otlp", "--publication", "pub_otlp"}
	mustRunRelay(t, bin, append([]string{"setup"}, base...)...)
	proc := startRelay(t, bin, logPath, append(append([]string{"run", "--tracing"}, base...), "--brokers", kafka.Brokers[0],
		"--metrics-addr", "", "--status-interval", "500ms", "--topic-template", kafka.Topic(relaytype.DefaultTopicTemplate))...)

	// The producer: a request span around the business transaction.
	shop := recv.provider(t, "shop")
	w, err := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Propagator: prop, TracerProvider: shop})
	if err != nil {
		t.Fatal(err)
	}
	rctx, request := shop.Tracer("shop").Start(ctx, "POST /payments")
	err = pgx.BeginFunc(rctx, db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(rctx, tx, outbox.Message{AggregateType: "payment", AggregateID: "p-1",
			EventType: "payment.requested", BusinessKey: "pay-1", Payload: []byte(`{"amount_cents":100}`)})
		return err
	})
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	var afterText string
	if err := db.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&afterText); err != nil {
		t.Fatal(err)
	}
	after, err := pglogrepl.ParseLSN(afterText)
	if err != nil {
		t.Fatal(err)
	}
	recs := testenv.WaitForRecords(t, kafka.Brokers, topic, 1, 2*time.Minute)
	rec := recs[0]
	traceparent, _ := rec.Header("traceparent")

	// The consumer, and the record delivered a second time.
	payments := recv.provider(t, "payments")
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "payments", TracerProvider: payments, Propagator: prop,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{Brokers: kafka.Brokers, GroupID: kafka.Topic("payments"), Topics: []string{topic},
		Inbox: in, Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) { return "ref-1", nil }})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := testenv.Go(ctx, t, c.Run)
	testenv.WaitFor(t, 2*time.Minute, "the first delivery's process span", func() (bool, error) { return len(recv.named("process ")) >= 1, nil })
	again := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		again.Headers = append(again.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	testenv.Produce(t, kafka.Brokers, false, again)
	testenv.WaitFor(t, 2*time.Minute, "the second delivery's process span", func() (bool, error) { return len(recv.named("process ")) >= 2, nil })
	if err := stopConsumer(); err != nil {
		t.Fatal(err)
	}
	if code := proc.stop(time.Minute); code != 0 {
		t.Fatalf("relay exit %d", code)
	}
	testenv.WaitFor(t, time.Minute, "the relay's send span", func() (bool, error) { return len(recv.named("send ")) >= 1, nil })

	creates, sends, processes, settles := recv.named("create"), recv.named("send "), recv.named("process "), recv.named("commit")
	if len(creates) != 1 || len(sends) != 1 || len(processes) != 2 || len(settles) == 0 {
		t.Fatalf("%d create, %d send, %d process, %d settle spans; want 1, 1, 2, at least 1", len(creates), len(sends), len(processes), len(settles))
	}
	create, send := creates[0], sends[0]
	requestTrace := request.SpanContext().TraceID()
	if got := "00-" + hex.EncodeToString(create.TraceId) + "-" + hex.EncodeToString(create.SpanId) + "-01"; traceparent != got {
		t.Fatalf("traceparent in Kafka %q, want the create span's context %q, unmodified", traceparent, got)
	}
	for _, s := range append([]otlpSpan{create, send}, processes...) {
		if string(s.TraceId) != string(requestTrace[:]) {
			t.Errorf("%s span of %s in trace %x, want the request's %s", s.Name, s.service, s.TraceId, requestTrace)
		}
	}
	linksTo := func(s otlpSpan, to otlpSpan) bool {
		return slices.ContainsFunc(s.Links, func(l *tracepb.Span_Link) bool {
			return string(l.TraceId) == string(to.TraceId) && string(l.SpanId) == string(to.SpanId)
		})
	}
	check := func(s otlpSpan, service string, kind tracepb.Span_SpanKind, parent []byte, want map[string]string) {
		t.Helper()
		if s.service != service || s.Kind != kind || string(s.ParentSpanId) != string(parent) {
			t.Errorf("%s span: service %s, kind %v, parent %x; want %s, %v, %x", s.Name, s.service, s.Kind, s.ParentSpanId, service, kind, parent)
		}
		for k, v := range want {
			if got := s.attr(k); got != v {
				t.Errorf("%s span of %s: %s = %q, want %q", s.Name, service, k, got, v)
			}
		}
	}
	requestSpan := request.SpanContext().SpanID()
	check(create, "shop", tracepb.Span_SPAN_KIND_PRODUCER, requestSpan[:],
		map[string]string{"messaging.system": "kafka", "messaging.operation.type": "create", "messaging.kafka.message.key": "p-1"})
	partition, offset := strconv.Itoa(int(rec.Partition)), strconv.FormatInt(rec.Offset, 10)
	messageID, _ := rec.Header("message-id")
	check(send, "pgoutbox-relay", tracepb.Span_SPAN_KIND_CLIENT, create.SpanId, map[string]string{"messaging.system": "kafka",
		"messaging.operation.type": "send", "messaging.operation.name": "send", "messaging.destination.name": topic,
		"messaging.batch.message_count": "1", "messaging.destination.partition.id": partition, "messaging.kafka.offset": offset,
		"messaging.kafka.message.key": "p-1", "messaging.message.id": messageID})
	if send.Name != "send "+topic || !linksTo(send, create) {
		t.Errorf("send span %q links %v; want send %s linked to the create span", send.Name, send.Links, topic)
	}
	if lsn, err := pglogrepl.ParseLSN(send.attr("pgoutbox.commit_lsn")); err != nil || lsn == 0 || lsn > after {
		t.Errorf("pgoutbox.commit_lsn %q, want the row's commit, before %s", send.attr("pgoutbox.commit_lsn"), after)
	}
	if lag, err := strconv.ParseFloat(send.attr("pgoutbox.outbox.lag"), 64); err != nil || lag < 0 || lag > 120 {
		t.Errorf("pgoutbox.outbox.lag %q: want seconds from commit to send", send.attr("pgoutbox.outbox.lag"))
	}
	var outcomes []string
	for _, p := range processes {
		check(p, "payments", tracepb.Span_SPAN_KIND_CONSUMER, create.SpanId, map[string]string{"messaging.system": "kafka",
			"messaging.operation.type": "process", "messaging.destination.name": topic, "messaging.message.id": messageID})
		if !linksTo(p, create) {
			t.Errorf("process span links %v, want one to the create span", p.Links)
		}
		outcomes = append(outcomes, p.attr("pgoutbox.inbox.outcome"))
	}
	slices.Sort(outcomes)
	if !slices.Equal(outcomes, []string{"duplicate", "processed"}) {
		t.Errorf("process spans' outcomes %v, want processed and duplicate", outcomes)
	}
	for _, s := range settles {
		check(s, "payments", tracepb.Span_SPAN_KIND_CLIENT, nil, map[string]string{"messaging.operation.type": "settle"})
	}
	if path := os.Getenv("PGOUTBOX_TRACE_WATERFALL"); path != "" {
		spans := append(append(append([]otlpSpan{}, recv.named("POST ")...), create, send), processes...)
		if err := os.WriteFile(path, []byte(waterfall(spans)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the trace received:\n%s", waterfall(append(append(append([]otlpSpan{}, recv.named("POST ")...), create, send), processes...)))
}

// waterfall draws spans as a tracing UI's timeline: one line per span,
// indented under its parent, with its service, its start after the first
// span's and its duration, and a bar.
func waterfall(spans []otlpSpan) string {
	slices.SortStableFunc(spans, func(a, b otlpSpan) int { return int(int64(a.StartTimeUnixNano) - int64(b.StartTimeUnixNano)) })
	if len(spans) == 0 {
		return ""
	}
	t0 := spans[0].StartTimeUnixNano
	var tEnd uint64
	for _, s := range spans {
		tEnd = max(tEnd, s.EndTimeUnixNano)
	}
	const width = 40
	scale := float64(width) / float64(max(tEnd-t0, 1))
	depth := map[string]int{}
	var b strings.Builder
	fmt.Fprintf(&b, "%-15s %-52s %9s %9s  %s\n", "service", "span", "start", "duration",
		"timeline ("+time.Duration(tEnd-t0).Round(100*time.Microsecond).String()+")")
	for _, s := range spans {
		d := 0
		if p, ok := depth[string(s.ParentSpanId)]; ok {
			d = p + 1
		}
		depth[string(s.SpanId)] = d
		from := int(float64(s.StartTimeUnixNano-t0) * scale)
		n := max(1, int(float64(s.EndTimeUnixNano-s.StartTimeUnixNano)*scale))
		bar := strings.Repeat(" ", from) + strings.Repeat("█", min(n, width-from))
		label := strings.Repeat("  ", d) + s.Name
		if len(s.Links) > 0 {
			label += fmt.Sprintf(" (%d link)", len(s.Links))
		}
		if o := s.attr("pgoutbox.inbox.outcome"); o != "" {
			label += " [" + o + "]"
		}
		fmt.Fprintf(&b, "%-15s %-52s %9s %9s |%-*s|\n", s.service, label,
			"+"+time.Duration(s.StartTimeUnixNano-t0).Round(100*time.Microsecond).String(),
			time.Duration(s.EndTimeUnixNano-s.StartTimeUnixNano).Round(100*time.Microsecond).String(), width, bar)
	}
	return b.String()
}
