package relay

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"testing"
)

// The seed streams decode to the events and errors a relay acts on.
func TestDecodeSeeds(t *testing.T) {
	t.Parallel()
	c, _ := (&Config{DatabaseURL: "x", MaxMessageBytes: 4096, Logger: slog.New(slog.DiscardHandler)}).withDefaults()
	type result struct {
		kinds   []walKind
		reasons []string // "" for a valid event
		errs    int
	}
	run := func(stream []byte) result {
		d := newDecoder(&c, fuzzOutbox)
		var r result
		for len(stream) >= 2 {
			n := int(binary.BigEndian.Uint16(stream))
			msg := stream[2 : 2+n]
			stream = stream[2+n:]
			it, err := d.decode(msg)
			if err != nil {
				r.errs++
				continue
			}
			r.kinds = append(r.kinds, it.kind)
			if it.kind == walEvent {
				reason := ""
				if it.ev.invalid != nil {
					reason = it.ev.invalid.Reason
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
	d := newDecoder(&c, fuzzOutbox)
	var last walItem
	for s := seeds[0]; len(s) >= 2; {
		n := int(binary.BigEndian.Uint16(s))
		it, _ := d.decode(s[2 : 2+n])
		if it.kind == walEvent {
			last = it
		}
		if it.kind == walCommit && it.endLSN != 120 {
			t.Fatalf("commit end LSN %d, want 120 (TransactionEndLSN)", it.endLSN)
		}
		s = s[2+n:]
	}
	m := last.ev.msg
	if m.Topic != "outbox.order" || string(m.Key) != "o-1" || string(m.Value) != `{"a": 1}` || len(m.Headers) != 6 ||
		m.Headers[5].Key != "traceparent" || string(m.Headers[5].Value) != "00-1" {
		t.Fatalf("record %+v", m)
	}

	if r := run(seeds[1]); len(r.reasons) != 1 || r.reasons[0] != ReasonNullColumn {
		t.Fatalf("bad row: %+v", r)
	}
	if r := run(seeds[2]); len(r.reasons) != 1 || r.reasons[0] != "" {
		t.Fatalf("bytea row: %+v", r)
	}
	if r := run(seeds[3]); len(r.reasons) != 2 || r.reasons[0] != "" || r.reasons[1] != ReasonBadMessage {
		t.Fatalf("logical messages: %+v (other prefixes must be ignored)", r)
	}
	// A relation with missing columns stops the relay under InvalidStop;
	// by default its rows are invalid (bad-columns) instead.
	const unusable = "relay: outbox table columns unusable: public.outbox: missing column event_type; missing column business_key; missing column payload"
	stop := c
	stop.OnInvalid = InvalidStop
	d = newDecoder(&stop, fuzzOutbox)
	n := int(binary.BigEndian.Uint16(seeds[4]))
	if _, err := d.decode(seeds[4][2 : 2+n]); !errors.Is(err, ErrTableColumns) || err.Error() != unusable {
		t.Fatalf("relation with missing columns: %v", err)
	}
	d = newDecoder(&c, fuzzOutbox)
	if _, err := d.decode(seeds[4][2 : 2+n]); err != nil || len(d.relations) != 1 {
		t.Fatalf("relation with missing columns, dead-letter policy: %v", err)
	}
	for _, l := range d.relations {
		if l == nil || l.foreign != "" || l.problem != unusable {
			t.Fatalf("relation with missing columns, dead-letter policy: layout %+v", l)
		}
	}
	// A row of a table that is not the outbox is invalid, never skipped.
	if r := run(seeds[5]); r.errs != 0 || len(r.reasons) != 1 || r.reasons[0] != ReasonNotOutbox {
		t.Fatalf("other table: %+v", r)
	}
	d = newDecoder(&c, fuzzOutbox)
	var other walItem
	for s := seeds[5]; len(s) >= 2; {
		n := int(binary.BigEndian.Uint16(s))
		other, _ = d.decode(s[2 : 2+n])
		s = s[2+n:]
	}
	if string(other.ev.msg.Value) != `{"x":"1"}` || other.ev.invalid.Detail !=
		"a row of table public.other, which the publication publishes but is not the outbox table public.outbox (the value holds its columns as JSON)" {
		t.Fatalf("other table's row: %q %+v", other.ev.msg.Value, other.ev.invalid)
	}
}
