package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// largeRows decodes n outbox rows of 100 KB, each value filled with its
// row's letter from first, as the WAL reader does.
func largeRows(t *testing.T, first, n int) []decode.Event {
	t.Helper()
	l, err := decode.CheckColumns("public.outbox", relaytype.TableFormatPgoutbox, pgoutputtest.Cols, pgoutputtest.Types)
	if err != nil {
		t.Fatal(err)
	}
	d := decode.NewDecoder(decode.Config{Table: "public.outbox", TableFormat: relaytype.TableFormatPgoutbox, TopicTemplate: "t",
		DeadLetterTopic: "outbox.dlq", MaxMessageBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}, pgoutputtest.Outbox)
	text := func(s string) decode.TupleColumn {
		return decode.TupleColumn{Kind: pglogrepl.TupleDataTypeText, Data: []byte(s)}
	}
	null := decode.TupleColumn{Kind: pglogrepl.TupleDataTypeNull}
	evs := make([]decode.Event, n)
	for i := range evs {
		row := first + i
		evs[i] = d.RowEvent(&l, []decode.TupleColumn{text(fmt.Sprintf("00000000-0000-4000-8000-%012d", row)), text("order"),
			text("k"), text("order.created"), text(fmt.Sprintf("bk-%d", row)), text(string(letterValue(row))), null, null, text("now")})
		if evs[i].Invalid != nil {
			t.Fatalf("row %d: %v", row, evs[i].Invalid)
		}
	}
	return evs
}

// letterValue is the value of row i: 100 KB of one letter.
func letterValue(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i%26)}, 100_000) }

// keeper is a publisher that keeps the values it was given, uncopied,
// and answers every record with verdict.
type keeper struct {
	verdict publish.Verdict
	values  [][]byte
}

func (p *keeper) Open(context.Context, publish.Session) error { return nil }
func (p *keeper) Close()                                      {}
func (p *keeper) Write(_ context.Context, recs []*publish.Record, out []publish.Outcome) error {
	for i, r := range recs {
		p.values = append(p.values, r.Value)
		out[i] = publish.Outcome{Verdict: p.verdict}
		if p.verdict != publish.Confirmed {
			out[i].Err = errors.New("refused for good")
		}
	}
	return nil
}

// The sink recycles a large row's memory once the publisher wrote it,
// and only then: the reader's next rows reuse what a written batch held,
// while what a failed write held stays as it was (the publisher may still
// hold it: see publish.Publisher.Write).
func TestRunRecyclesOnlyWrittenRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		verdict  publish.Verdict
		recycled bool
	}{
		{"written", publish.Confirmed, true},
		{"failed", publish.Fatal, false},
	} {
		// Not parallel with each other: the pools are the process's.
		t.Run(tc.name, func(t *testing.T) {
			st, _ := newLoopTest(t, nil)
			p := &keeper{verdict: tc.verdict}
			st.pub = p
			const rows = 8
			evs := largeRows(t, 0, rows)
			id := st.tr.Begin()
			st.tr.Add(id, rows)
			st.tr.Commit(id, 100)
			for i := range evs {
				evs[i].Tx, evs[i].Commit = id, time.Now()
				evs[i].Record.Pos = publish.Position{Final: 100, Seq: i}
				evs[i].Cost = st.q.Budget.Cost(&evs[i])
				if !st.q.Budget.TryTake(evs[i].Cost) {
					t.Fatal("budget full")
				}
			}
			if !st.q.Room.TryAcquire(rows) {
				t.Fatal("queue full")
			}
			st.q.Events <- evs
			st.q.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := st.Run(ctx, st.q, st.tr)
			if tc.recycled != (err == nil) {
				t.Fatalf("Run: %v", err)
			}
			if len(p.values) != rows {
				t.Fatalf("the publisher was given %d records, want %d", len(p.values), rows)
			}
			// Rows of another letter each, decoded after the write, as
			// the reader does once the budget has room.
			largeRows(t, rows, 2*rows)
			overwritten := 0
			for i, v := range p.values {
				if !bytes.Equal(v, letterValue(i)) {
					overwritten++
				}
			}
			if tc.recycled && overwritten == 0 {
				t.Errorf("no written record's memory was reused by the rows decoded after")
			}
			if !tc.recycled && overwritten > 0 {
				t.Errorf("%d of %d records of a failed write were overwritten by rows decoded after it", overwritten, rows)
			}
		})
	}
}
