package decode

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Every pooled size falls in a class whose buffers hold it, wasting at
// most 1/classSteps of the buffer, and a buffer's capacity maps back to
// its class.
func TestSizeClass(t *testing.T) {
	t.Parallel()
	prev := -1
	for n := pooledMin; n <= pooledMax; n += 1 + n/61 {
		class, size := sizeClass(n)
		if size < n || size-n > size/classSteps {
			t.Fatalf("sizeClass(%d) = %d bytes", n, size)
		}
		if back, again := sizeClass(size); back != class || again != size {
			t.Fatalf("sizeClass(%d) = class %d of %d bytes, but sizeClass(%d) = class %d of %d", n, class, size, size, back, again)
		}
		if class < prev || class >= len(rowPools) {
			t.Fatalf("sizeClass(%d) = class %d after %d (of %d)", n, class, prev, len(rowPools))
		}
		prev = class
	}
}

// rowCols is an outbox row (pgoutputtest.Cols) whose payload is payload.
func rowCols(id int, payload []byte) []TupleColumn {
	text := func(s string) TupleColumn { return TupleColumn{Kind: pglogrepl.TupleDataTypeText, Data: []byte(s)} }
	return []TupleColumn{
		text(fmt.Sprintf("00000000-0000-4000-8000-%012d", id)), text("order"), text(fmt.Sprintf("order-%d", id)),
		text("order.created"), text(fmt.Sprintf("bk-%d", id)), {Kind: pglogrepl.TupleDataTypeText, Data: payload},
		{Kind: pglogrepl.TupleDataTypeNull}, {Kind: pglogrepl.TupleDataTypeNull}, text("2026-12-06 08:00:00+00"),
	}
}

// A large row's copy comes from the pools and goes back once recycled:
// draining rows of 100 KB allocates a small part of their bytes (it was
// all of them, a copy per row, before the pools), and a row decoded into a
// recycled buffer holds its own bytes, none of the row before. A small
// row's copy is not pooled. Not parallel: MemStats counts the process's
// allocations.
func TestLargeRowsReuseRecycledMemory(t *testing.T) {
	l, err := CheckColumns("public.outbox", relaytype.TableFormatPgoutbox, pgoutputtest.Cols, pgoutputtest.Types)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(testConfig(nil), pgoutputtest.Outbox)
	var payloads [26][]byte
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{'a' + byte(i)}, 100_000)
	}
	payload := func(i int) []byte { return payloads[i%len(payloads)] }

	small := d.RowEvent(&l, rowCols(0, []byte(`{"small":true}`)))
	if small.pooled != nil {
		t.Errorf("a row of %d bytes took a pooled buffer", len(small.Record.Value))
	}

	const rows = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range rows {
		ev := d.RowEvent(&l, rowCols(i, payload(i)))
		if ev.Invalid != nil {
			t.Fatalf("row %d invalid: %v", i, ev.Invalid)
		}
		if ev.pooled == nil {
			t.Fatalf("row %d of %d bytes did not take a pooled buffer", i, len(ev.Record.Value))
		}
		if !bytes.Equal(ev.Record.Value, payload(i)) || string(ev.Record.Key) != fmt.Sprintf("order-%d", i) {
			t.Fatalf("row %d: key %q, value %q..., want its own", i, ev.Record.Key, ev.Record.Value[:8])
		}
		evs := []Event{ev}
		Recycle(evs)
		Recycle(evs) // a second call gives nothing back twice
		if evs[0].pooled != nil {
			t.Fatalf("row %d: still holds its buffer after Recycle", i)
		}
	}
	runtime.ReadMemStats(&after)
	// Under the race detector sync.Pool drops a quarter of what it is
	// given: ~27 KB a row.
	perRow := int(after.TotalAlloc-before.TotalAlloc) / rows
	t.Logf("%d bytes allocated a row", perRow)
	if perRow > 100_000/2 {
		t.Errorf("%d bytes allocated a row of 100 KB: its copy is not reused", perRow)
	}
}
