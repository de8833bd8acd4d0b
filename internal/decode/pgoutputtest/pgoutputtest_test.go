package pgoutputtest_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
)

// pgEpoch is where pgoutput's timestamps (microseconds) count from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// parse decodes b with pglogrepl, a decoder written apart from these
// encoders: what they write is what a server sends only if it reads back.
func parse[M pglogrepl.Message](t *testing.T, b []byte) M {
	t.Helper()
	m, err := pglogrepl.Parse(b)
	if err != nil {
		t.Fatalf("pglogrepl.Parse(%x): %v", b, err)
	}
	got, ok := m.(M)
	if !ok {
		t.Fatalf("pglogrepl.Parse(%x) = %T", b, m)
	}
	return got
}

func TestRelation(t *testing.T) {
	t.Parallel()
	m := parse[*pglogrepl.RelationMessage](t, pgoutputtest.Relation(16385, "app", "outbox", pgoutputtest.Cols, pgoutputtest.Types))
	if m.RelationID != 16385 || m.Namespace != "app" || m.RelationName != "outbox" || m.ReplicaIdentity != 'd' || int(m.ColumnNum) != len(pgoutputtest.Cols) {
		t.Fatalf("relation %+v", m)
	}
	for i, c := range m.Columns {
		if c.Name != pgoutputtest.Cols[i] || c.DataType != pgoutputtest.Types[i] || c.TypeModifier != -1 || c.Flags != 0 {
			t.Errorf("column %d = %+v, want %s of type %d, typmod -1", i, c, pgoutputtest.Cols[i], pgoutputtest.Types[i])
		}
	}
	if len(pgoutputtest.Cols) != len(pgoutputtest.Types) {
		t.Errorf("%d columns, %d types", len(pgoutputtest.Cols), len(pgoutputtest.Types))
	}
}

func TestBeginCommit(t *testing.T) {
	t.Parallel()
	const ts = 789_000_123_456
	b := parse[*pglogrepl.BeginMessage](t, pgoutputtest.Begin(0x1_0000_00A0, ts, 42))
	if b.FinalLSN != 0x1_0000_00A0 || b.Xid != 42 || !b.CommitTime.Equal(pgEpoch.Add(ts*time.Microsecond)) {
		t.Errorf("begin %+v", b)
	}
	c := parse[*pglogrepl.CommitMessage](t, pgoutputtest.Commit(0x90, 0xA0, ts))
	if c.Flags != 0 || c.CommitLSN != 0x90 || c.TransactionEndLSN != 0xA0 || !c.CommitTime.Equal(pgEpoch.Add(ts*time.Microsecond)) {
		t.Errorf("commit %+v", c)
	}
}

// An insert's nil value is NULL, an empty one an empty text value.
func TestInsert(t *testing.T) {
	t.Parallel()
	vals := [][]byte{[]byte("0190"), nil, {}, []byte(`{"a":1}`)}
	m := parse[*pglogrepl.InsertMessage](t, pgoutputtest.Insert(16386, vals))
	if m.RelationID != 16386 || m.Tuple == nil || int(m.Tuple.ColumnNum) != len(vals) {
		t.Fatalf("insert %+v", m)
	}
	for i, c := range m.Tuple.Columns {
		want := byte('t')
		if vals[i] == nil {
			want = 'n'
		}
		if c.DataType != want || !bytes.Equal(c.Data, vals[i]) {
			t.Errorf("column %d = %q %q, want %q %q", i, c.DataType, c.Data, want, vals[i])
		}
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	for _, tx := range []bool{true, false} {
		m := parse[*pglogrepl.LogicalDecodingMessage](t, pgoutputtest.Message(tx, 0x70, "pgoutbox", []byte("hello")))
		if m.Transactional != tx || m.LSN != 0x70 || m.Prefix != "pgoutbox" || string(m.Content) != "hello" {
			t.Errorf("message %+v, want transactional %v", m, tx)
		}
	}
}

// IsOutbox is true for Outbox's OIDs only.
func TestOutboxOIDs(t *testing.T) {
	t.Parallel()
	for oid, want := range map[uint32]bool{16385: true, 16386: true, 16387: false, 0: false} {
		if got, err := pgoutputtest.Outbox.IsOutbox(&pglogrepl.RelationMessage{RelationID: oid}); got != want || err != nil {
			t.Errorf("IsOutbox(%d) = %v, %v; want %v", oid, got, err, want)
		}
	}
}
