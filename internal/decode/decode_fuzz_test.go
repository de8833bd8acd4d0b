package decode

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// frame joins messages, each prefixed with its uint16 length: one fuzz
// input is a short replication stream.
func frame(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

func fuzzSeeds() [][]byte {
	row := func(vals ...string) [][]byte {
		out := make([][]byte, len(vals))
		for i, v := range vals {
			if v != "\x00NULL" {
				out[i] = []byte(v)
			}
		}
		return out
	}
	rel := pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, pgoutputtest.Types)
	byteaTypes := append([]uint32(nil), pgoutputtest.Types...)
	byteaTypes[5] = tableformat.OIDBytea
	// The content EmitTx writes (payload bytes 00 01 ff in base64).
	content := []byte(`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000003","aggregate_type":"order","aggregate_id":"o-1",` +
		`"event_type":"e","business_key":"k","payload":"AAH/","headers":{"h":"v"}}`)
	return [][]byte{
		frame(rel, pgoutputtest.Begin(100, 1000, 7), pgoutputtest.Insert(16385, row("0190f0e0-0000-7000-8000-000000000001", "order", "o-1", "order.created", "bk",
			`{"a": 1}`, `{"traceparent": "00-1"}`, "\x00NULL", "2026-01-01")), pgoutputtest.Commit(100, 120, 1000)),
		frame(rel, pgoutputtest.Begin(100, 1000, 7), pgoutputtest.Insert(16385, row("not-a-uuid", "order", "o-1", "e", "\x00NULL", `{}`, `[1]`, "bad topic", "x")), pgoutputtest.Commit(100, 120, 1000)),
		frame(pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, byteaTypes), pgoutputtest.Begin(1, 2, 3),
			pgoutputtest.Insert(16385, row("0190f0e0-0000-7000-8000-000000000002", "t", "a", "e", "k", `\x00ff10`, "\x00NULL", "x.y", "t")), pgoutputtest.Commit(1, 2, 3)),
		frame(pgoutputtest.Begin(1, 2, 3), pgoutputtest.Message(true, 5, contract.LogicalMessagePrefix, content), pgoutputtest.Message(true, 6, "other", []byte("x")),
			pgoutputtest.Message(true, 7, "pgoutbox", []byte(`{"v":1,"id":"zz"}`)), pgoutputtest.Commit(1, 9, 3)),
		frame(pgoutputtest.Relation(16386, "public", "outbox", pgoutputtest.Cols[:3], pgoutputtest.Types[:3])),
		frame(pgoutputtest.Relation(16387, "public", "other", []string{"x"}, []uint32{23}), pgoutputtest.Insert(16387, row("1"))),
	}
}

// FuzzDecode feeds pgoutput streams to the decoder: it returns an error or
// an event, and an event is either invalid (dead-letter material) or a
// record the broker accepts. It never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	c := testConfig(func(c *Config) { c.MaxMessageBytes = 4096 })
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(c, pgoutputtest.Outbox)
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			msg := data[:n]
			data = data[n:]
			it, err := d.Decode(msg)
			if err != nil || it.Kind != WALEvent {
				continue
			}
			ev := it.Event
			if ev.Invalid != nil {
				if ev.Invalid.Reason == "" || ev.Invalid.MessageID != ev.ID {
					t.Fatalf("invalid event without a reason or with a mismatched ID: %+v", ev.Invalid)
				}
				continue
			}
			if err := contract.CheckTopic([]byte(ev.Record.Topic)); err != nil {
				t.Fatalf("valid event with topic %q", ev.Record.Topic)
			}
			if RecordSize(&ev.Record) > c.MaxMessageBytes || ev.Record.Key == nil || ev.Record.Value == nil {
				t.Fatalf("valid event breaks limits: key %q, %d bytes", ev.Record.Key, RecordSize(&ev.Record))
			}
			if ev.Record.Headers[0].Key != "message-id" || !utf8.Valid(ev.Record.Headers[0].Value) {
				t.Fatalf("headers %v", ev.Record.Headers)
			}
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzDecode from fuzzSeeds
// when PGOUTBOX_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("PGOUTBOX_WRITE_CORPUS") == "" {
		t.Log("set PGOUTBOX_WRITE_CORPUS=1 to regenerate testdata/fuzz/FuzzDecode")
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParseInsert checks parseInsert against pglogrepl.Parse: an Insert
// message parseInsert reads, pglogrepl reads to the same relation and
// columns. (Where parseInsert finds the message short, pglogrepl indexes
// past its end and panics, after allocating the length the message
// declares: it is not asked.)
func FuzzParseInsert(f *testing.F) {
	f.Add(pgoutputtest.Insert(16385, [][]byte{[]byte("a"), nil, {}, []byte(`{"x": 1}`)}))
	f.Add(pgoutputtest.Insert(1, nil))
	f.Add([]byte{'I', 0, 0, 0, 1, 'N', 0, 2, 'u', 'b', 0, 0, 0, 1, 'z'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != 'I' {
			return
		}
		rel, cols, err := parseInsert(data, nil)
		if err != nil {
			return
		}
		want, werr := func() (m pglogrepl.Message, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return pglogrepl.Parse(data)
		}()
		if werr != nil {
			if len(data) == 8 { // pglogrepl wants 8 bytes after the type, even with no column
				return
			}
			t.Fatalf("parseInsert reads %x, pglogrepl: %v", data, werr)
		}
		ins := want.(*pglogrepl.InsertMessage)
		if rel != ins.RelationID || len(cols) != len(ins.Tuple.Columns) {
			t.Fatalf("relation %d with %d columns, pglogrepl %d with %d", rel, len(cols), ins.RelationID, len(ins.Tuple.Columns))
		}
		for i, c := range ins.Tuple.Columns {
			if cols[i].Kind != c.DataType || string(cols[i].Data) != string(c.Data) {
				t.Fatalf("column %d: %q %q, pglogrepl %q %q", i, cols[i].Kind, cols[i].Data, c.DataType, c.Data)
			}
		}
	})
}
