package tableformat

import (
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"strings"
	"testing"
)

func TestTopicTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl, want string
		agg, ev    bool // uses the placeholder
	}{
		{"outbox.{aggregate_type}", "outbox.Order", true, false},
		{"{aggregate_type}.{event_type}", "Order.Created", true, true},
		{"{event_type}-{event_type}", "Created-Created", false, true},
		{"fixed", "fixed", false, false},
		{"{aggregate_type", "{aggregate_type", false, false},
	} {
		tt := ParseTopicTemplate(tc.tmpl)
		if got := string(tt.Render(nil, []byte("Order"), []byte("Created"))); got != tc.want {
			t.Errorf("%q renders %q, want %q", tc.tmpl, got, tc.want)
		}
		if tt.Uses(AggregateTypePart) != tc.agg || tt.Uses(EventTypePart) != tc.ev {
			t.Errorf("%q: uses aggregate %v event %v, want %v %v", tc.tmpl, tt.Uses(AggregateTypePart), tt.Uses(EventTypePart), tc.agg, tc.ev)
		}
	}
}

func TestTopicTemplateCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{
		{"outbox.{aggregate_type}", true},
		{"{aggregate_type}", true},
		{"fixed.topic", true},
		{"has space.{event_type}", false},
		{"a/b", false},
		{"", false},
		{strings.Repeat("x", 250), false},
		{strings.Repeat("x", 250) + "{event_type}", false},
	} {
		if err := ParseTopicTemplate(tc.tmpl).Check(); (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tc.tmpl, err, tc.ok)
		}
	}
}

func TestShapesAndColumns(t *testing.T) {
	t.Parallel()
	for _, f := range relaytype.TableFormats {
		if Shape(f) == nil || Shape(f).TopicTemplate == "" {
			t.Errorf("format %s: no shape or topic template", f)
		}
	}
	if Shape(relaytype.TableFormatDebezium).TopicTemplate != relaytype.DefaultDebeziumTopicTemplate {
		t.Errorf("debezium template %q", Shape(relaytype.TableFormatDebezium).TopicTemplate)
	}
	if !HasColumn([]string{"id", "payload"}, "payload") || HasColumn([]string{"id"}, "payload") {
		t.Error("HasColumn")
	}
}

func TestTraceHeaders(t *testing.T) {
	t.Parallel()
	got := TraceHeaders([]byte("#comment\ntraceparent=00-abc-def-01\n tracestate = k=v \nother=x\n"))
	if len(got) != 2 || got["traceparent"] != "00-abc-def-01" || got["tracestate"] != "k=v" {
		t.Errorf("TraceHeaders = %v", got)
	}
	if TraceHeaders([]byte("nothing")) != nil {
		t.Error("no trace context: want nil")
	}
}

// A tracingspancontext as Java writes it (java.util.Properties.store, as
// Debezium's outbox extensions do: a date comment, then key=value with
// '=', ':', '#' and '!' escaped by a backslash, and non-ASCII as \uXXXX),
// and as Properties.load reads any other: ':' or whitespace separators,
// CRLF or CR line ends, continued lines, '!' comments. The traceparent and
// tracestate are the values Java would load, byte for byte.
func TestTraceHeadersJavaProperties(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ name, in, tp, ts string }{
		{"store", "#Sun Dec 06 05:09:44 UTC 2026\ntraceparent=" + tp + "\n", tp, ""},
		{"store escapes = and :", "#Sun Dec 06 05:09:44 UTC 2026\ntracestate=rojo\\=00f067aa0ba902b7,congo\\=t61rcWkgMzE,x\\:y\\#z\\!w\ntraceparent=" + tp + "\n",
			tp, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE,x:y#z!w"},
		{"windows line ends", "#d\r\ntraceparent=" + tp + "\r\ntracestate=a\\=1\r\n", tp, "a=1"},
		{"old mac line ends", "#d\rtraceparent=" + tp + "\r", tp, ""},
		{"colon separator", "traceparent:" + tp, tp, ""},
		{"space separator", "traceparent   " + tp, tp, ""},
		{"space around the separator", "traceparent  =  " + tp, tp, ""},
		{"continued line", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-\\\n    00f067aa0ba902b7-01\n", tp, ""},
		{"unicode escape", "tracestate=k\\u003dv\ntraceparent=" + tp, tp, "k=v"},
		{"escaped key", "trace\\parent=" + tp, tp, ""},
		{"bang comment", "!traceparent=00-0-0-00\ntraceparent=" + tp, tp, ""},
		{"comment after spaces", "   #traceparent=00-0-0-00\ntraceparent=" + tp, tp, ""},
		{"a backslash ending a comment continues nothing", "#c\\\ntraceparent=" + tp, tp, ""},
		{"last one wins", "traceparent=00-0-0-00\ntraceparent=" + tp, tp, ""},
	} {
		got := TraceHeaders([]byte(tc.in))
		want := map[string]string{"traceparent": tc.tp}
		if tc.ts != "" {
			want["tracestate"] = tc.ts
		}
		if len(got) != len(want) || got["traceparent"] != want["traceparent"] || got["tracestate"] != want["tracestate"] {
			t.Errorf("%s: TraceHeaders(%q) = %q, want %q", tc.name, tc.in, got, want)
		}
	}
}

// Any text reads without a panic, and a traceparent read back from what
// it was stored as (Properties.store's escapes) is the one stored.
func FuzzTraceHeaders(f *testing.F) {
	for _, s := range []string{"traceparent=00-a-b-01", "#c\\\na\\u00", "k\\uD83D\\uDE00=v", "x\\", "\\\r\n\\\r", "a:b=c d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = TraceHeaders([]byte(s))
		stored := strings.NewReplacer("\\", "\\\\", "=", "\\=", ":", "\\:", "#", "\\#", "!", "\\!", "\n", "\\n", "\r", "\\r", "\t", "\\t", "\f", "\\f").Replace(s)
		want := strings.Trim(s, " \t\f\r\n")
		if strings.HasPrefix(s, " ") {
			return // Properties.store escapes a leading space; this replacer does not
		}
		if got := TraceHeaders([]byte("#date\ntraceparent=" + stored + "\n")); got["traceparent"] != want {
			t.Fatalf("stored %q, read back %q, want %q", stored, got["traceparent"], want)
		}
	})
}

func TestDefaultCloudEventsSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, table, want string }{
		{"postgres://u:secret@h/shop", "outbox", "/pgoutbox/shop/public.outbox"},
		{"host=h dbname=mydb password=x", "s.t", "/pgoutbox/mydb/s.t"},
	} {
		got := DefaultCloudEventsSource(tc.url, tc.table)
		if got != tc.want || strings.Contains(got, "secret") {
			t.Errorf("DefaultCloudEventsSource(%q, %q) = %q, want %q", tc.url, tc.table, got, tc.want)
		}
	}
}

// The behaviours that differ between formats are fields of the shape.
func TestShapesSayWhatDiffers(t *testing.T) {
	pg, dbz := Shape(relaytype.TableFormatPgoutbox), Shape(relaytype.TableFormatDebezium)
	if !pg.CreatesTable || dbz.CreatesTable {
		t.Errorf("CreatesTable: pgoutbox %v, debezium %v; want true, false", pg.CreatesTable, dbz.CreatesTable)
	}
	if pg.IDIsBusinessKey() || !dbz.IDIsBusinessKey() {
		t.Errorf("IDIsBusinessKey: pgoutbox %v, debezium %v; want false, true", pg.IDIsBusinessKey(), dbz.IDIsBusinessKey())
	}
	if pg.RouterHeaders || pg.IDHeader != "" || !dbz.RouterHeaders || dbz.IDHeader != DebeziumHeaderID {
		t.Errorf("router headers: pgoutbox %v %q, debezium %v %q", pg.RouterHeaders, pg.IDHeader, dbz.RouterHeaders, dbz.IDHeader)
	}
	if got := FormatList(); got != "pgoutbox, debezium" {
		t.Errorf("FormatList() = %q", got)
	}
}
