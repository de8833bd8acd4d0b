package decode

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// testConfig is the decoder's part of a relay configuration with its
// defaults (relay.Config), edited by edit when set.
func testConfig(edit func(*Config)) Config {
	c := Config{Table: "public.outbox", TableFormat: relaytype.TableFormatPgoutbox, TopicTemplate: "outbox.{aggregate_type}",
		DeadLetterTopic: "outbox.dlq", ProgressTopic: contract.DefaultProgressTopic, MaxMessageBytes: 1000000,
		Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&c)
	}
	return c
}

// The seed streams decode to the events and errors a relay acts on.
func TestDecodeSeeds(t *testing.T) {
	t.Parallel()
	c := testConfig(func(c *Config) { c.MaxMessageBytes = 4096 })
	type result struct {
		kinds   []WALKind
		reasons []string // "" for a valid event
		errs    int
	}
	run := func(stream []byte) result {
		d := NewDecoder(c, pgoutputtest.Outbox)
		var r result
		for len(stream) >= 2 {
			n := int(binary.BigEndian.Uint16(stream))
			msg := stream[2 : 2+n]
			stream = stream[2+n:]
			it, err := d.Decode(msg)
			if err != nil {
				r.errs++
				continue
			}
			r.kinds = append(r.kinds, it.Kind)
			if it.Kind == WALEvent {
				reason := ""
				if it.Event.Invalid != nil {
					reason = it.Event.Invalid.Reason
				}
				r.reasons = append(r.reasons, reason)
			}
		}
		return r
	}
	seeds := fuzzSeeds()

	r := run(seeds[0])
	if r.errs != 0 || len(r.reasons) != 1 || r.reasons[0] != "" {
		t.Fatalf("valid row: %+v", r)
	}
	d := NewDecoder(c, pgoutputtest.Outbox)
	var last WALItem
	for s := seeds[0]; len(s) >= 2; {
		n := int(binary.BigEndian.Uint16(s))
		it, _ := d.Decode(s[2 : 2+n])
		if it.Kind == WALEvent {
			last = it
		}
		if it.Kind == WALCommit && it.EndLSN != 120 {
			t.Fatalf("commit end LSN %d, want 120 (TransactionEndLSN)", it.EndLSN)
		}
		s = s[2+n:]
	}
	m := last.Event.Record
	if m.Topic != "outbox.order" || string(m.Key) != "o-1" || string(m.Value) != `{"a": 1}` || len(m.Headers) != 6 ||
		m.Headers[5].Key != "traceparent" || string(m.Headers[5].Value) != "00-1" {
		t.Fatalf("record %+v", m)
	}

	if r := run(seeds[1]); len(r.reasons) != 1 || r.reasons[0] != relaytype.ReasonNullColumn {
		t.Fatalf("bad row: %+v", r)
	}
	if r := run(seeds[2]); len(r.reasons) != 1 || r.reasons[0] != "" {
		t.Fatalf("bytea row: %+v", r)
	}
	if r := run(seeds[3]); len(r.reasons) != 2 || r.reasons[0] != "" || r.reasons[1] != relaytype.ReasonBadMessage {
		t.Fatalf("logical messages: %+v (other prefixes must be ignored)", r)
	}
	// A relation with missing columns stops the relay under InvalidStop;
	// by default its rows are invalid (bad-columns) instead.
	const unusable = "relay: outbox table columns unusable: public.outbox: missing column event_type; missing column business_key; missing column payload"
	stop := c
	stop.StopOnInvalid = true
	d = NewDecoder(stop, pgoutputtest.Outbox)
	n := int(binary.BigEndian.Uint16(seeds[4]))
	if _, err := d.Decode(seeds[4][2 : 2+n]); !errors.Is(err, relaytype.ErrTableColumns) || err.Error() != unusable {
		t.Fatalf("relation with missing columns: %v", err)
	}
	d = NewDecoder(c, pgoutputtest.Outbox)
	if _, err := d.Decode(seeds[4][2 : 2+n]); err != nil || len(d.relations) != 1 {
		t.Fatalf("relation with missing columns, dead-letter policy: %v", err)
	}
	for _, l := range d.relations {
		if l == nil || l.foreign != "" || l.problem != unusable {
			t.Fatalf("relation with missing columns, dead-letter policy: layout %+v", l)
		}
	}
	// A row of a table that is not the outbox is invalid, never skipped.
	if r := run(seeds[5]); r.errs != 0 || len(r.reasons) != 1 || r.reasons[0] != relaytype.ReasonNotOutbox {
		t.Fatalf("other table: %+v", r)
	}
	d = NewDecoder(c, pgoutputtest.Outbox)
	var other WALItem
	for s := seeds[5]; len(s) >= 2; {
		n := int(binary.BigEndian.Uint16(s))
		other, _ = d.Decode(s[2 : 2+n])
		s = s[2+n:]
	}
	if string(other.Event.Record.Value) != `{"x":"1"}` || other.Event.Invalid.Detail !=
		"a row of table public.other, which the publication publishes but is not the outbox table public.outbox (the value holds its columns as JSON)" {
		t.Fatalf("other table's row: %q %+v", other.Event.Record.Value, other.Event.Invalid)
	}
}

// BenchmarkDecodeInsert decodes one outbox row as the relay's hot path
// does: the Insert message of a ~300-byte payload into its Kafka record.
func BenchmarkDecodeInsert(b *testing.B) {
	c := testConfig(nil)
	d := NewDecoder(c, pgoutputtest.Outbox)
	if _, err := d.Decode(pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, pgoutputtest.Types)); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Decode(pgoutputtest.Begin(100, 1000, 7)); err != nil {
		b.Fatal(err)
	}
	payload := `{"order_id":"ord-000000042","customer_id":"cus-000042","amount_cents":142,"currency":"EUR","status":"created","note":"` +
		strings.Repeat("x", 180) + `"}`
	msg := pgoutputtest.Insert(16385, [][]byte{[]byte("0190f0e0-0000-7000-8000-000000000001"), []byte("bench"), []byte("agg-42"),
		[]byte("bench.created"), []byte("bk-42"), []byte(payload), nil, nil, []byte("2026-11-30 16:56:09.123456+00")})
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		it, err := d.Decode(msg)
		if err != nil || it.Event.Invalid != nil {
			b.Fatal(err, it.Event.Invalid)
		}
	}
}

// The parsed topic template renders what replacing its placeholders in the
// template text gives, and the decoder's cache never mixes rows up.
func TestTopicTemplate(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"outbox.{aggregate_type}", "{event_type}", "{aggregate_type}.{event_type}.v1", "fixed",
		"{event_type}{aggregate_type}", "{aggregate_type", "x{{aggregate_type}}", "{event_type}{event_type}", ""} {
		for _, at := range []string{"order", "", "{event_type}"} {
			for _, et := range []string{"order.created", "{aggregate_type}"} {
				want := strings.NewReplacer("{aggregate_type}", at, "{event_type}", et).Replace(tmpl)
				if got := string(tableformat.ParseTopicTemplate(tmpl).Render(nil, []byte(at), []byte(et))); got != want {
					t.Errorf("template %q with %q, %q: %q, want %q", tmpl, at, et, got, want)
				}
			}
		}
	}
	var c topicCache
	tmpl := tableformat.ParseTopicTemplate("{aggregate_type}.{event_type}")
	for i := range 3 * topicCacheSize {
		at, et := []byte(strconv.Itoa(i%(2*topicCacheSize))), []byte("e"+strconv.Itoa(i%7))
		if got, err := c.rendered(&tmpl, at, et); err != nil || got != string(at)+"."+string(et) {
			t.Fatalf("row %d: topic %q (%v), want %q", i, got, err, string(at)+"."+string(et))
		}
		if got, err := c.explicit(at); err != nil || got != string(at) {
			t.Fatalf("row %d: explicit topic %q (%v), want %q", i, got, err, at)
		}
	}
	// The key keeps ("a", "bc") and ("ab", "c") apart.
	a, _ := c.rendered(&tmpl, []byte("a"), []byte("bc"))
	b, _ := c.rendered(&tmpl, []byte("ab"), []byte("c"))
	if a != "a.bc" || b != "ab.c" {
		t.Fatalf("topics %q and %q, want a.bc and ab.c", a, b)
	}
}

// A row may not publish where relays write: its own dead-letter and
// progress topics, a fleet's topics (pgoutbox.fleet.*) and the topics
// ReservedTopic names (in a fleet, the other sources' dead-letter and
// progress topics); such a row goes to the dead-letter topic (bad-topic).
func TestRouteRefusesRelayTopics(t *testing.T) {
	t.Parallel()
	d := NewDecoder(testConfig(func(c *Config) {
		c.ReservedTopic = func(topic string) bool { return topic == "tenant-b.dlq" || topic == "tenant-b.progress" }
	}), nil)
	for _, tc := range []struct{ column, want string }{
		{"orders", "orders"},
		{"outbox.dlq", "outbox.dlq"},
		{contract.DefaultProgressTopic, "outbox.dlq"},
		{"pgoutbox.fleet.orders-fleet", "outbox.dlq"},
		{"tenant-b.dlq", "outbox.dlq"},
		{"tenant-b.progress", "outbox.dlq"},
		{"tenant-b.orders", "tenant-b.orders"},
	} {
		if got := d.Route([]byte("order"), []byte("e"), []byte(tc.column)); got != tc.want {
			t.Errorf("a row naming topic %s goes to %s, want %s", tc.column, got, tc.want)
		}
	}
	if err := d.topicProblem("tenant-b.dlq"); err == nil || !strings.Contains(err.Error(), "another source of the fleet") {
		t.Errorf("the reason for another source's dead-letter topic: %v", err)
	}
	if got := d.Route([]byte("fleet.x"), []byte("e"), nil); got != "outbox.fleet.x" {
		t.Errorf("a rendered topic outside the reserved ones goes to %s", got)
	}
}

// A publication of all tables sends the relay's own tables too (the
// migration bookkeeping, the state row): their rows are skipped, while
// another table's rows are still dead-lettered as not-outbox. The first
// relay run after a Debezium hand-over once dead-lettered its own
// bookkeeping row.
func TestRelayTablesAreSkipped(t *testing.T) {
	t.Parallel()
	d := NewDecoder(testConfig(func(c *Config) {
		c.RelayTables = []pgname.Table{{Schema: "public", Name: "pgoutbox_migration"}, {Schema: "public", Name: "pgoutbox_relay_state"}}
	}), pgoutputtest.Outbox)
	for i, tc := range []struct {
		schema, name string
		want         WALKind
	}{
		{"public", "pgoutbox_migration", walNone},
		{"public", "pgoutbox_relay_state", walNone},
		{"app", "pgoutbox_migration", WALEvent}, // not this outbox's
		{"public", "orders", WALEvent},
	} {
		oid := uint32(20000 + i)
		if _, err := d.Decode(pgoutputtest.Relation(oid, tc.schema, tc.name, []string{"target"}, []uint32{25})); err != nil {
			t.Fatal(err)
		}
		it, err := d.Decode(pgoutputtest.Insert(oid, [][]byte{[]byte("x")}))
		if err != nil {
			t.Fatal(err)
		}
		if it.Kind != tc.want {
			t.Errorf("a row of %s.%s: kind %v, want %v", tc.schema, tc.name, it.Kind, tc.want)
		}
		if it.Kind == WALEvent && (it.Event.Invalid == nil || it.Event.Invalid.Reason != relaytype.ReasonNotOutbox) {
			t.Errorf("a row of %s.%s: %+v, want reason not-outbox", tc.schema, tc.name, it.Event.Invalid)
		}
	}
}
