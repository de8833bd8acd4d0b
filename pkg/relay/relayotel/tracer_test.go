package relayotel_test

import (
	"errors"
	"iter"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayotel"
)

// record is a relayhook.Record of a test.
type record struct {
	topic, id, key string
	partition      int32
	offset         int64
	commit         time.Time
	lsn            uint64
	headers        [][2]string
}

func (r *record) Topic() string { return r.topic }
func (r *record) Key() []byte   { return []byte(r.key) }
func (r *record) Value() []byte { return []byte(`{}`) }
func (r *record) Header(name string) ([]byte, bool) {
	for _, h := range r.headers {
		if h[0] == name {
			return []byte(h[1]), true
		}
	}
	return nil, false
}
func (r *record) Headers() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, h := range r.headers {
			if !yield(h[0], []byte(h[1])) {
				return
			}
		}
	}
}
func (r *record) Partition() int32  { return r.partition }
func (r *record) Offset() int64     { return r.offset }
func (r *record) Commit() time.Time { return r.commit }
func (r *record) CommitLSN() uint64 { return r.lsn }
func (r *record) MessageID() string { return r.id }
func (r *record) DeadLetter() bool  { return false }

const (
	tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func tracer(t *testing.T, cfg relayotel.Config) (*relayotel.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	cfg.TracerProvider = tp
	return relayotel.New(&cfg), exp
}

// A write of several records is one "send {topic}" span of kind CLIENT,
// the root of its own trace, with the batch's attributes and a link to
// each record's creation context (none for a record without one), each
// link naming its record.
func TestBatchSpan(t *testing.T) {
	t.Parallel()
	tr, exp := tracer(t, relayotel.Config{})
	start := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	recs := []relayhook.Record{
		&record{topic: "outbox.order", id: "m1", key: "a", partition: 2, offset: 10, commit: start.Add(-3 * time.Second), lsn: 0x16_B374D848,
			headers: [][2]string{{"traceparent", tp1}, {"tracestate", "vendor=x"}}},
		&record{topic: "outbox.order", id: "m2", key: "b", partition: 2, offset: 11, commit: start.Add(-time.Second), lsn: 0x16_B374D900},
		&record{topic: "outbox.order", id: "m3", key: "c", partition: 2, offset: 12, commit: start.Add(-time.Second), lsn: 0x16_B374D900,
			headers: [][2]string{{"traceparent", tp2}}},
	}
	tr.OnBatchWritten(relayhook.BatchWritten{Records: recs, Start: start, End: start.Add(5 * time.Millisecond)})
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "send outbox.order" || s.SpanKind != trace.SpanKindClient || s.Parent.IsValid() || !s.StartTime.Equal(start) ||
		!s.EndTime.Equal(start.Add(5*time.Millisecond)) || s.InstrumentationScope.Name != relayotel.ScopeName {
		t.Fatalf("span %s kind %v parent %v from %v to %v scope %s", s.Name, s.SpanKind, s.Parent, s.StartTime, s.EndTime, s.InstrumentationScope.Name)
	}
	want := map[string]string{"messaging.system": "kafka", "messaging.operation.type": "send", "messaging.operation.name": "send",
		"messaging.destination.name": "outbox.order", "messaging.batch.message_count": "3", "messaging.destination.partition.id": "2",
		"pgoutbox.commit_lsn": "16/B374D900", "pgoutbox.outbox.lag": "3"}
	got := attrs(s.Attributes)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"messaging.kafka.offset", "messaging.message.id", "pgoutbox.kafka.transactional"} {
		if _, ok := got[k]; ok {
			t.Errorf("a batch's span has %s", k)
		}
	}
	if len(s.Links) != 2 {
		t.Fatalf("%d links, want 2: %v", len(s.Links), s.Links)
	}
	for i, want := range []struct{ tp, id, offset, state string }{{tp1, "m1", "10", "vendor=x"}, {tp2, "m3", "12", ""}} {
		l := s.Links[i]
		if got := "00-" + l.SpanContext.TraceID().String() + "-" + l.SpanContext.SpanID().String() + "-01"; got != want.tp || !l.SpanContext.IsRemote() {
			t.Errorf("link %d to %s, want %s", i, got, want.tp)
		}
		if l.SpanContext.TraceState().String() != want.state {
			t.Errorf("link %d trace state %q, want %q", i, l.SpanContext.TraceState().String(), want.state)
		}
		la := attrs(l.Attributes)
		if la["messaging.message.id"] != want.id || la["messaging.kafka.offset"] != want.offset || la["messaging.destination.partition.id"] != "2" {
			t.Errorf("link %d attributes %v, want message %s at offset %s", i, la, want.id, want.offset)
		}
	}
}

// A write of one record is a child of its creation context (unless
// LinkOnly) and links to it, with the record's key, offset and message ID;
// a transactional write says so; a failed one has an error status.
func TestSingleRecordSpan(t *testing.T) {
	t.Parallel()
	for _, linkOnly := range []bool{false, true} {
		tr, exp := tracer(t, relayotel.Config{LinkOnly: linkOnly})
		rec := &record{topic: "t", id: "m1", key: "k", partition: 0, offset: 7, commit: time.Now(), lsn: 1, headers: [][2]string{{"traceparent", tp1}}}
		tr.OnBatchWritten(relayhook.BatchWritten{Records: []relayhook.Record{rec}, Start: time.Now(), End: time.Now(), Transactional: true})
		tr.OnBatchWritten(relayhook.BatchWritten{Records: []relayhook.Record{rec}, Start: time.Now(), End: time.Now(),
			Err: errors.New("boom"), Errs: []error{errors.New("boom")}})
		// A call that failed as a whole has no per-record errors.
		tr.OnBatchWritten(relayhook.BatchWritten{Records: []relayhook.Record{rec}, Start: time.Now(), End: time.Now(), Err: errors.New("down")})
		spans := exp.GetSpans()
		if len(spans) != 3 {
			t.Fatalf("%d spans, want 3", len(spans))
		}
		s := spans[0]
		parent := s.Parent.IsValid() && s.Parent.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" && s.Parent.SpanID().String() == "00f067aa0ba902b7"
		if parent == linkOnly || len(s.Links) != 1 {
			t.Errorf("LinkOnly %v: parent %v, %d links", linkOnly, s.Parent, len(s.Links))
		}
		got := attrs(s.Attributes)
		for k, v := range map[string]string{"messaging.kafka.message.key": "k", "messaging.kafka.offset": "7", "messaging.message.id": "m1",
			"pgoutbox.kafka.transactional": "true", "pgoutbox.commit_lsn": "0/1"} {
			if got[k] != v {
				t.Errorf("attribute %s = %q, want %q", k, got[k], v)
			}
		}
		for _, f := range spans[1:] {
			if f.Status.Code != codes.Error || attrs(f.Attributes)["messaging.kafka.offset"] != "" || len(f.Links) != 1 || attrs(f.Links[0].Attributes)["messaging.kafka.offset"] != "" {
				t.Errorf("failed write: status %v, attributes %v, links %v", f.Status, f.Attributes, f.Links)
			}
		}
	}
}

// A write whose span is not sampled allocates nothing per record: the
// links are built only for a recording span. Not parallel: AllocsPerRun
// counts the process's allocations.
func TestUnsampledWriteAllocationsPerRecord(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = tp.Shutdown(t.Context()) }()
	tr := relayotel.New(&relayotel.Config{TracerProvider: tp})
	per := func(n int) float64 {
		recs := make([]relayhook.Record, n)
		for i := range recs {
			recs[i] = &record{topic: "t", id: "m", commit: time.Now(), headers: [][2]string{{"traceparent", tp1}}}
		}
		w := relayhook.BatchWritten{Records: recs, Start: time.Now(), End: time.Now()}
		return testing.AllocsPerRun(100, func() { tr.OnBatchWritten(w) })
	}
	if a, b := per(10), per(1000); b > a {
		t.Fatalf("an unsampled write of 10 records made %v allocations, of 1000 %v: want no more per record", a, b)
	}
}
