package wal

import (
	"log/slog"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"github.com/prometheus/client_golang/prometheus"
)

// The reader allocates nothing per event beyond the decoder's two (the
// row's values, its headers): an event moved to the heap on its way to
// the sink (a closure capturing it, a hook taking its address) would add
// one for every event. Not parallel: AllocsPerRun counts the process's
// allocations.
func TestStreamAllocationsPerEvent(t *testing.T) {
	c, _ := (&relaytype.Config{DatabaseURL: "x", Logger: slog.New(slog.DiscardHandler)}).WithDefaults()
	s := &Stream{cfg: ConfigOf(&c, decode.DeadLettersOf(&c, nil)), dec: decode.NewDecoder(decode.ConfigOf(&c), pgoutputtest.Outbox), tracker: acktrack.New(0),
		queue: queue.NewQueue(c.BatchSize, c.BufferBytes, prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_buffer_bytes"}))}
	for _, m := range [][]byte{pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, pgoutputtest.Types), pgoutputtest.Begin(100, 1000, 7)} {
		if err := s.handle(m); err != nil {
			t.Fatal(err)
		}
	}
	insert := pgoutputtest.Insert(16385, [][]byte{[]byte("0190f0e0-0000-7000-8000-000000000001"), []byte("order"), []byte("agg-42"),
		[]byte("order.created"), []byte("bk-42"), []byte(`{"amount_cents":142}`), nil, nil, []byte("2026-11-30 16:56:09.123456+00")})
	// Fewer than BatchSize events: all stay staged in the transaction.
	allocs := testing.AllocsPerRun(c.BatchSize/2, func() {
		if err := s.handle(insert); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("the reader made %v allocations per event, want at most 2 (the row's values and headers)", allocs)
	}
	if n := len(s.staged); n != c.BatchSize/2+1 || s.staged[0].Invalid != nil {
		t.Fatalf("%d events staged (first invalid: %v), want %d valid", n, s.staged[0].Invalid, c.BatchSize/2+1)
	}
}
