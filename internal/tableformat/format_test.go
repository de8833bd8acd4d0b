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
