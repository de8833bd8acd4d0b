package queue

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// An event costs its record size, at least 1 and at most the whole budget,
// so that a record larger than the budget passes alone.
func TestBudgetCost(t *testing.T) {
	t.Parallel()
	q := NewQueue(10, 100, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"}))
	for _, tc := range []struct {
		rec  publish.Record
		want int64
	}{
		{publish.Record{}, 1},
		{publish.Record{Key: []byte("k"), Value: []byte("vv")}, int64(decode.RecordSize(&publish.Record{Key: []byte("k"), Value: []byte("vv")}))},
		{publish.Record{Value: make([]byte, 1000)}, 100},
	} {
		ev := decode.Event{Record: tc.rec}
		if got := q.Budget.Cost(&ev); got != tc.want {
			t.Errorf("Cost(%d-byte value) = %d, want %d", len(tc.rec.Value), got, tc.want)
		}
	}
}

// The budget is taken and given back in costs, the gauge showing what is
// taken; Take waits for room, or gives up with its context.
func TestBudgetTakeGive(t *testing.T) {
	t.Parallel()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"})
	b := NewQueue(10, 100, g).Budget
	if !b.TryTake(60) || b.TryTake(50) {
		t.Fatal("TryTake: 60 of 100 then 50 more")
	}
	if got := testutil.ToFloat64(g); got != 60 {
		t.Errorf("gauge %v, want 60", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Take(ctx, 50); err == nil {
		t.Fatal("Take(50) with 40 free did not wait")
	}
	b.Give(60)
	b.Give(0) // an empty batch
	if err := b.Take(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(g); got != 100 {
		t.Errorf("gauge %v, want 100", got)
	}
}
