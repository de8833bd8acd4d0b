package acktrack_test

import (
	"time"

	"testing"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
)

// step is one call on the tracker; tx indexes the transactions begun so far.
type step struct {
	op   string // begin, add, commit, ack, idle
	tx   int
	n    int
	end  acktrack.LSN
	want acktrack.LSN // Confirmed after the step
}

func TestTracker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{
			{op: "begin", want: 100}, {op: "add", tx: 0, n: 2, want: 100}, {op: "commit", tx: 0, end: 200, want: 100},
			{op: "ack", tx: 0, n: 1, want: 100}, {op: "ack", tx: 0, n: 1, want: 200},
		}},
		{"acks before commit", []step{
			{op: "begin", want: 100}, {op: "add", tx: 0, n: 3, want: 100}, {op: "ack", tx: 0, n: 3, want: 100},
			{op: "commit", tx: 0, end: 150, want: 150},
		}},
		{"out of order never passes a gap", []step{
			{op: "begin", want: 100}, {op: "add", tx: 0, n: 1, want: 100}, {op: "commit", tx: 0, end: 200, want: 100},
			{op: "begin", want: 100}, {op: "add", tx: 1, n: 1, want: 100}, {op: "commit", tx: 1, end: 300, want: 100},
			{op: "begin", want: 100}, {op: "add", tx: 2, n: 2, want: 100}, {op: "commit", tx: 2, end: 400, want: 100},
			{op: "ack", tx: 2, n: 2, want: 100}, // later tx complete first
			{op: "ack", tx: 1, n: 1, want: 100},
			{op: "ack", tx: 0, n: 1, want: 400}, // gap closed: whole prefix
		}},
		{"middle gap", []step{
			{op: "begin", want: 0}, {op: "add", tx: 0, n: 1}, {op: "commit", tx: 0, end: 10},
			{op: "begin", want: 0}, {op: "add", tx: 1, n: 1}, {op: "commit", tx: 1, end: 20},
			{op: "begin", want: 0}, {op: "add", tx: 2, n: 1}, {op: "commit", tx: 2, end: 30},
			{op: "ack", tx: 0, n: 1, want: 10}, {op: "ack", tx: 2, n: 1, want: 10}, {op: "ack", tx: 1, n: 1, want: 30},
		}},
		{"empty transactions complete in order only", []step{
			{op: "begin", want: 100}, {op: "add", tx: 0, n: 1, want: 100}, {op: "commit", tx: 0, end: 200, want: 100},
			{op: "begin", want: 100}, {op: "commit", tx: 1, end: 250, want: 100}, // empty, but behind tx 0
			{op: "ack", tx: 0, n: 1, want: 250},
			{op: "begin", want: 250}, {op: "commit", tx: 2, end: 260, want: 260}, // empty at the head
		}},
		{"open transaction blocks", []step{
			{op: "begin", want: 100}, {op: "add", tx: 0, n: 1, want: 100}, {op: "ack", tx: 0, n: 1, want: 100},
			{op: "begin", want: 100}, {op: "add", tx: 1, n: 1, want: 100}, {op: "commit", tx: 1, end: 300, want: 100},
			{op: "ack", tx: 1, n: 1, want: 100}, // tx 0 not committed yet
			{op: "commit", tx: 0, end: 200, want: 300},
		}},
		{"idle advance only when nothing is in flight", []step{
			{op: "idle", end: 500, want: 500},
			{op: "begin", want: 500}, {op: "add", tx: 0, n: 1, want: 500}, {op: "commit", tx: 0, end: 600, want: 500},
			{op: "idle", end: 700, want: 500}, // tx 0 in flight
			{op: "ack", tx: 0, n: 1, want: 600},
			{op: "idle", end: 550, want: 600}, // never backwards
			{op: "idle", end: 700, want: 700},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := tt.steps[0].want
			tr := acktrack.New(start)
			var ids []acktrack.TxID
			for i, s := range tt.steps {
				switch s.op {
				case "begin":
					ids = append(ids, tr.Begin())
				case "add":
					tr.Add(ids[s.tx], s.n)
				case "commit":
					tr.Commit(ids[s.tx], s.end)
				case "ack":
					tr.Ack(ids[s.tx], s.n)
				case "idle":
					tr.AdvanceIdle(s.end)
				}
				if got := tr.Confirmed(); got != s.want {
					t.Fatalf("step %d %+v: confirmed %d, want %d", i, s, got, s.want)
				}
			}
		})
	}
}

func TestTrackerIdleAndInFlight(t *testing.T) {
	t.Parallel()
	tr := acktrack.New(0)
	if !tr.Idle() || tr.InFlight() != 0 {
		t.Fatal("new tracker not idle")
	}
	id := tr.Begin()
	if tr.Idle() {
		t.Fatal("idle with an open transaction")
	}
	tr.Add(id, 5)
	tr.Ack(id, 2)
	if tr.InFlight() != 3 {
		t.Fatalf("in flight %d, want 3", tr.InFlight())
	}
	tr.Ack(id, 3)
	tr.Commit(id, 42)
	if !tr.Idle() || tr.InFlight() != 0 || tr.Confirmed() != 42 {
		t.Fatalf("after completion: idle %v in flight %d confirmed %d", tr.Idle(), tr.InFlight(), tr.Confirmed())
	}
}

// A long random interleaving: Confirmed is always the end of the last
// transaction of the fully acknowledged prefix.
func TestTrackerRandomOrder(t *testing.T) {
	t.Parallel()
	tr := acktrack.New(0)
	const n = 2000
	ids := make([]acktrack.TxID, n)
	counts := make([]int, n)
	for i := range ids {
		ids[i] = tr.Begin()
		counts[i] = i % 4 // some empty
		tr.Add(ids[i], counts[i])
		tr.Commit(ids[i], acktrack.LSN(10*(i+1)))
	}
	done := make([]bool, n)
	for i, c := range counts {
		if c == 0 {
			done[i] = true
		}
	}
	// Acknowledge in a scrambled but deterministic order.
	for k := 0; k < n; k++ {
		i := (k * 7919) % n
		if counts[i] > 0 {
			tr.Ack(ids[i], counts[i])
			done[i] = true
		}
		prefix := 0
		for prefix < n && done[prefix] {
			prefix++
		}
		want := acktrack.LSN(10 * prefix)
		if got := tr.Confirmed(); got != want {
			t.Fatalf("after %d acks: confirmed %d, want %d", k+1, got, want)
		}
	}
}

// Oldest follows the first unconfirmed transaction as the prefix completes.
func TestTrackerOldest(t *testing.T) {
	t.Parallel()
	tr := acktrack.New(0)
	if _, ok := tr.Oldest(); ok {
		t.Fatal("Oldest on an empty tracker")
	}
	t1 := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	t2 := t1.Add(time.Second)
	a := tr.BeginAt(t1)
	tr.Add(a, 1)
	tr.Commit(a, 10)
	b := tr.BeginAt(t2)
	tr.Add(b, 1)
	tr.Commit(b, 20)
	tr.Ack(b, 1)
	if got, ok := tr.Oldest(); !ok || !got.Equal(t1) {
		t.Fatalf("Oldest = %v, %v; want %v (b is acknowledged but a is not)", got, ok, t1)
	}
	tr.Ack(a, 1)
	if got, ok := tr.Oldest(); ok {
		t.Fatalf("Oldest = %v after everything was confirmed", got)
	}
	c := tr.BeginAt(t2)
	tr.Add(c, 1)
	if got, ok := tr.Oldest(); !ok || !got.Equal(t2) {
		t.Fatalf("Oldest = %v, %v; want the open transaction's %v", got, ok, t2)
	}
}
