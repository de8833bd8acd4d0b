package relay

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// pgoutput (proto_version 1) message builders.

func pgString(b []byte, s string) []byte { return append(append(b, s...), 0) }

func pgRelation(id uint32, schema, name string, cols []string, types []uint32) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = pgString(b, schema)
	b = pgString(b, name)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for i, c := range cols {
		b = append(b, 0)
		b = pgString(b, c)
		b = binary.BigEndian.AppendUint32(b, types[i])
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

func pgBegin(final uint64, ts int64, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, final)
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	return binary.BigEndian.AppendUint32(b, xid)
}

func pgCommit(lsn, end uint64, ts int64) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, uint64(ts))
}

// pgInsert encodes values; nil is NULL.
func pgInsert(id uint32, vals [][]byte) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			b = append(b, 'n')
			continue
		}
		b = append(b, 't')
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func pgMessage(transactional bool, lsn uint64, prefix string, content []byte) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, lsn)
	b = pgString(b, prefix)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

// outboxOIDs is a relationResolver for tests: the relations of these OIDs
// are the outbox.
type outboxOIDs []uint32

func (o outboxOIDs) isOutbox(m *pglogrepl.RelationMessage) (bool, error) {
	return slices.Contains(o, m.RelationID), nil
}

// fuzzOutbox: 16387 (the seeds' "other" table) is not the outbox.
var fuzzOutbox = outboxOIDs{16385, 16386}

var fuzzCols = []string{"id", "aggregate_type", "aggregate_id", "event_type", "business_key", "payload", "headers", "topic", "created_at"}
var fuzzTypes = []uint32{oidUUID, oidText, oidText, oidText, oidText, oidJSONB, oidJSONB, oidText, 1184}

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
	rel := pgRelation(16385, "public", "outbox", fuzzCols, fuzzTypes)
	byteaTypes := append([]uint32(nil), fuzzTypes...)
	byteaTypes[5] = oidBytea
	// The content EmitTx writes (payload bytes 00 01 ff in base64).
	content := []byte(`{"v":1,"id":"0190f0e0-0000-7000-8000-000000000003","aggregate_type":"order","aggregate_id":"o-1",` +
		`"event_type":"e","business_key":"k","payload":"AAH/","headers":{"h":"v"}}`)
	return [][]byte{
		frame(rel, pgBegin(100, 1000, 7), pgInsert(16385, row("0190f0e0-0000-7000-8000-000000000001", "order", "o-1", "order.created", "bk",
			`{"a": 1}`, `{"traceparent": "00-1"}`, "\x00NULL", "2026-01-01")), pgCommit(100, 120, 1000)),
		frame(rel, pgBegin(100, 1000, 7), pgInsert(16385, row("not-a-uuid", "order", "o-1", "e", "\x00NULL", `{}`, `[1]`, "bad topic", "x")), pgCommit(100, 120, 1000)),
		frame(pgRelation(16385, "public", "outbox", fuzzCols, byteaTypes), pgBegin(1, 2, 3),
			pgInsert(16385, row("0190f0e0-0000-7000-8000-000000000002", "t", "a", "e", "k", `\x00ff10`, "\x00NULL", "x.y", "t")), pgCommit(1, 2, 3)),
		frame(pgBegin(1, 2, 3), pgMessage(true, 5, outbox.LogicalMessagePrefix, content), pgMessage(true, 6, "other", []byte("x")),
			pgMessage(true, 7, "pgoutbox", []byte(`{"v":1,"id":"zz"}`)), pgCommit(1, 9, 3)),
		frame(pgRelation(16386, "public", "outbox", fuzzCols[:3], fuzzTypes[:3])),
		frame(pgRelation(16387, "public", "other", []string{"x"}, []uint32{23}), pgInsert(16387, row("1"))),
	}
}

// FuzzDecode feeds pgoutput streams to the decoder: it returns an error or
// an event, and an event is either invalid (dead-letter material) or a
// record the broker accepts. It never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	c, err := (&Config{DatabaseURL: "x", MaxMessageBytes: 4096, Logger: slog.New(slog.DiscardHandler)}).withDefaults()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(&c, fuzzOutbox)
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			msg := data[:n]
			data = data[n:]
			it, err := d.decode(msg)
			if err != nil || it.kind != walEvent {
				continue
			}
			ev := it.ev
			if ev.invalid != nil {
				if ev.invalid.Reason == "" || ev.invalid.MessageID != ev.id {
					t.Fatalf("invalid event without a reason or with a mismatched ID: %+v", ev.invalid)
				}
				continue
			}
			if err := contract.CheckTopic([]byte(ev.msg.Topic)); err != nil {
				t.Fatalf("valid event with topic %q", ev.msg.Topic)
			}
			if recordSize(&ev.msg) > c.MaxMessageBytes || ev.msg.Key == nil || ev.msg.Value == nil {
				t.Fatalf("valid event breaks limits: key %q, %d bytes", ev.msg.Key, recordSize(&ev.msg))
			}
			if ev.msg.Headers[0].Key != "message-id" || !utf8.Valid(ev.msg.Headers[0].Value) {
				t.Fatalf("headers %v", ev.msg.Headers)
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
	f.Add(pgInsert(16385, [][]byte{[]byte("a"), nil, {}, []byte(`{"x": 1}`)}))
	f.Add(pgInsert(1, nil))
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
			if cols[i].kind != c.DataType || string(cols[i].data) != string(c.Data) {
				t.Fatalf("column %d: %q %q, pglogrepl %q %q", i, cols[i].kind, cols[i].data, c.DataType, c.Data)
			}
		}
	})
}
