package decode

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

var (
	debeziumCols  = []string{"id", "aggregatetype", "aggregateid", "type", "payload", "timestamp", "tracingspancontext"}
	debeziumTypes = []uint32{tableformat.OIDUUID, tableformat.OIDVarchar, tableformat.OIDVarchar, tableformat.OIDVarchar, tableformat.OIDJSONB, 1184, tableformat.OIDVarchar}
)

// decodeRow decodes a relation, a begin at commit and one insert of vals
// into the outbox (OID 16385) with a decoder of c, and returns the event.
func decodeRow(t *testing.T, c *Config, cols []string, types []uint32, commit time.Time, vals ...[]byte) Event {
	t.Helper()
	d := NewDecoder(*c, pgoutputtest.Outbox)
	// pgoutput's commit time: microseconds since 2000-01-01.
	us := commit.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
	for _, m := range [][]byte{pgoutputtest.Relation(16385, "public", "outbox", cols, types), pgoutputtest.Begin(100, us, 7)} {
		if _, err := d.Decode(m); err != nil {
			t.Fatal(err)
		}
	}
	it, err := d.Decode(pgoutputtest.Insert(16385, vals))
	if err != nil || it.Kind != WALEvent {
		t.Fatalf("insert: %v %v", it.Kind, err)
	}
	return it.Event
}

func headers(m *publish.Record) map[string]string {
	out := make(map[string]string, len(m.Headers))
	for _, h := range m.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

// A Debezium outbox row maps to the router's topic, key, value and headers
// plus the contract's, the ID serving as business key; NULL payload is a
// null value, and tracingspancontext's traceparent becomes the header.
func TestDecodeDebeziumRow(t *testing.T) {
	t.Parallel()
	c := testConfig(func(c *Config) {
		c.TableFormat = relaytype.TableFormatDebezium
		c.TopicTemplate = tableformat.Shape(c.TableFormat).TopicTemplate
	})
	id := "4d47e190-0402-4048-bc2c-89dd54343cdc"
	ev := decodeRow(t, &c, debeziumCols, debeziumTypes, time.Unix(1700000000, 0),
		[]byte(id), []byte("Order"), []byte("1"), []byte("OrderCreated"), []byte(`{"id": 1}`), []byte("2024-01-01 00:00:00+00"),
		[]byte("#comment\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nother=x\n"))
	if ev.Invalid != nil {
		t.Fatalf("invalid: %+v", ev.Invalid)
	}
	if ev.Record.Topic != "outbox.event.Order" || string(ev.Record.Key) != "1" || string(ev.Record.Value) != `{"id": 1}` {
		t.Fatalf("record %s %q %q", ev.Record.Topic, ev.Record.Key, ev.Record.Value)
	}
	want := map[string]string{"id": id, "type": "OrderCreated", "message-id": id, "business-key": id, "event-type": "OrderCreated",
		"aggregate-type": "Order", "aggregate-id": "1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if got := headers(&ev.Record); !maps.Equal(got, want) {
		t.Fatalf("headers %v, want %v", got, want)
	}

	ev = decodeRow(t, &c, debeziumCols[:5], debeziumTypes[:5], time.Unix(1700000000, 0),
		[]byte(id), []byte("Order"), []byte("1"), []byte("OrderDeleted"), nil)
	if ev.Invalid != nil || ev.Record.Value != nil {
		t.Fatalf("NULL payload: invalid %+v, value %q; want a null value", ev.Invalid, ev.Record.Value)
	}
	// Under the pgoutbox format a NULL payload stays invalid.
	ev = decodeRow(t, new(testConfig(nil)), pgoutputtest.Cols, pgoutputtest.Types, time.Unix(1700000000, 0),
		[]byte(id), []byte("order"), []byte("1"), []byte("t"), []byte("k"), nil, nil, nil, []byte("2024-01-01 00:00:00+00"))
	if ev.Invalid == nil || ev.Invalid.Reason != relaytype.ReasonNullColumn {
		t.Fatalf("pgoutbox NULL payload: %+v", ev.Invalid)
	}
}

// CheckColumns names the format a table of the other shape fits.
func TestCheckColumnsNamesTheOtherFormat(t *testing.T) {
	t.Parallel()
	_, err := CheckColumns("public.outboxevent", relaytype.TableFormatPgoutbox, debeziumCols, debeziumTypes)
	const want = "relay: outbox table columns unusable: public.outboxevent: missing column aggregate_type; missing column aggregate_id; " +
		"missing column event_type; missing column business_key (its columns are those of table format debezium: pass --table-format debezium)"
	if !errors.Is(err, relaytype.ErrTableColumns) || err.Error() != want {
		t.Fatalf("pgoutbox format on a Debezium table: %v\nwant %s", err, want)
	}
	_, err = CheckColumns("public.outbox", relaytype.TableFormatDebezium, pgoutputtest.Cols, pgoutputtest.Types)
	if !errors.Is(err, relaytype.ErrTableColumns) || err.Error() != "relay: outbox table columns unusable: public.outbox: missing column aggregatetype; "+
		"missing column aggregateid; missing column type (its columns are those of table format pgoutbox: pass --table-format pgoutbox)" {
		t.Fatalf("Debezium format on a pgoutbox table: %v", err)
	}
	if _, err := CheckColumns("public.outboxevent", relaytype.TableFormatDebezium, debeziumCols[:5], debeziumTypes[:5]); err != nil {
		t.Fatalf("Debezium table without the optional columns: %v", err)
	}
}

// With CloudEvents on, a record carries the binding's attributes: the
// configured source, the commit time in UTC to the millisecond, the
// payload's content type by column type; a row header naming one of them is
// bad-headers.
func TestCloudEventsHeaders(t *testing.T) {
	t.Parallel()
	c := testConfig(func(c *Config) { c.CloudEvents, c.CloudEventsSource = true, "urn:example:orders" })
	id := "018f4d2e-8b1c-7a3e-9f00-0123456789ab"
	commit := time.Date(2026, 3, 4, 5, 6, 7, 891234000, time.FixedZone("CET", 3600))
	row := func(payloadType uint32, headers string) Event {
		types := append([]uint32(nil), pgoutputtest.Types...)
		types[5] = payloadType
		return decodeRow(t, &c, pgoutputtest.Cols, types, commit, []byte(id), []byte("order"), []byte("o-1"), []byte("order.placed"),
			[]byte("k-1"), []byte(`{"a":1}`), []byte(headers), nil, []byte("2024-01-01 00:00:00+00"))
	}
	ev := row(tableformat.OIDJSONB, `{"x":"y"}`)
	want := map[string]string{"message-id": id, "business-key": "k-1", "event-type": "order.placed", "aggregate-type": "order",
		"aggregate-id": "o-1", "x": "y",
		"ce_specversion": "1.0", "ce_id": id, "ce_source": "urn:example:orders", "ce_type": "order.placed",
		"ce_time": "2026-03-04T04:06:07.891Z", "ce_subject": "o-1", "content-type": "application/json"}
	if got := headers(&ev.Record); ev.Invalid != nil || !maps.Equal(got, want) {
		t.Fatalf("headers %v (invalid %+v), want %v", got, ev.Invalid, want)
	}
	for typ, ct := range map[uint32]string{tableformat.OIDText: "text/plain; charset=utf-8", tableformat.OIDBytea: "application/octet-stream"} {
		payload := `{"a":1}`
		if typ == tableformat.OIDBytea {
			payload = `\x7b7d`
		}
		types := append([]uint32(nil), pgoutputtest.Types...)
		types[5] = typ
		ev := decodeRow(t, &c, pgoutputtest.Cols, types, commit, []byte(id), []byte("order"), []byte("o-1"), []byte("order.placed"),
			[]byte("k-1"), []byte(payload), nil, nil, []byte("2024-01-01 00:00:00+00"))
		if got := headers(&ev.Record)["content-type"]; got != ct {
			t.Errorf("payload type %d: content-type %q, want %q", typ, got, ct)
		}
	}
	for _, h := range []string{`{"ce_type":"other"}`, `{"CE_ID":"x"}`, `{"Content-Type":"text/xml"}`} {
		if ev := row(tableformat.OIDJSONB, h); ev.Invalid == nil || ev.Invalid.Reason != relaytype.ReasonBadHeaders {
			t.Errorf("row headers %s with CloudEvents on: invalid %+v, want bad-headers", h, ev.Invalid)
		}
	}
	// Without CloudEvents, no attribute is written and ce_* row headers pass.
	c.CloudEvents, c.CloudEventsSource = false, ""
	ev = row(tableformat.OIDJSONB, `{"ce_type":"other"}`)
	if got := headers(&ev.Record); ev.Invalid != nil || len(got) != 6 || got["ce_type"] != "other" {
		t.Fatalf("CloudEvents off: headers %v, invalid %+v", got, ev.Invalid)
	}
}

func TestTraceHeaders(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]map[string]string{
		"":                      nil,
		"#only a comment\n":     nil,
		"traceparent=00-a-b-01": {"traceparent": "00-a-b-01"},
		"#c\ntraceparent = 00-x \r\ntracestate=k=v\nspanid=1\n": {"traceparent": "00-x", "tracestate": "k=v"},
	} {
		if got := tableformat.TraceHeaders([]byte(in)); !maps.Equal(got, want) {
			t.Errorf("traceHeaders(%q) = %v, want %v", in, got, want)
		}
	}
}
