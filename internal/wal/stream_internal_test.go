package wal

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// newTestStream is a stream of a relay configuration with its defaults
// (relay.Config: batches of 1000, 16 MiB of buffer), logging to log, whose
// tracker starts at start.
func newTestStream(log *slog.Logger, start pglogrepl.LSN) *Stream {
	dl := &decode.DeadLetters{Topic: "outbox.dlq", MaxMessageBytes: 1000000, Logger: log}
	dc := decode.Config{Table: "public.outbox", TableFormat: relaytype.TableFormatPgoutbox, TopicTemplate: "outbox.{aggregate_type}",
		DeadLetterTopic: dl.Topic, ProgressTopic: contract.DefaultProgressTopic, MaxMessageBytes: dl.MaxMessageBytes, Logger: log}
	return &Stream{cfg: Config{BatchSize: 1000, DeadLetters: dl, Logger: log}, dec: decode.NewDecoder(dc, pgoutputtest.Outbox),
		tracker: acktrack.New(uint64(start)), queue: queue.NewQueue(1000, 16<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_buffer_bytes"}))}
}

// outboxStream is a stream of a default configuration inside a
// transaction of the outbox (relation 16385, commit time 1000 µs after
// the Postgres epoch), and an insert into it.
func outboxStream(t *testing.T) (s *Stream, insert []byte, batchSize int) {
	t.Helper()
	s = newTestStream(slog.New(slog.DiscardHandler), 0)
	for _, m := range [][]byte{pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, pgoutputtest.Types), pgoutputtest.Begin(100, 1000, 7)} {
		if err := s.handle(m); err != nil {
			t.Fatal(err)
		}
	}
	insert = pgoutputtest.Insert(16385, [][]byte{[]byte("0190f0e0-0000-7000-8000-000000000001"), []byte("order"), []byte("agg-42"),
		[]byte("order.created"), []byte("bk-42"), []byte(`{"amount_cents":142}`), nil, nil, []byte("2026-11-30 16:56:09.123456+00")})
	return s, insert, s.cfg.BatchSize
}

// The reader allocates nothing per event beyond the decoder's two (the
// row's values, its headers), with a relaytrace Read hook or without: an
// event moved to the heap on its way to the sink (a closure capturing it,
// a hook taking its address) would add one for every event. The hook sees
// each event's record, its commit time and when it was read. Not
// parallel: AllocsPerRun counts the process's allocations.
func TestStreamAllocationsPerEvent(t *testing.T) {
	for _, traced := range []bool{false, true} {
		s, insert, batchSize := outboxStream(t)
		var reads int
		if traced {
			h := &relaytrace.Hooks{Read: func(msg publish.Record, commit, read time.Time) {
				if string(msg.Key) == "agg-42" && commit.Equal(time.Date(2000, 1, 1, 0, 0, 0, 1000_000, time.UTC)) && read.Equal(s.readAt) {
					reads++
				}
			}}
			s.traceRead = relaytrace.FromContext(relaytrace.WithHooks(context.Background(), h)).Read // as Run does
		}
		// Fewer than BatchSize events: all stay staged in the transaction.
		runs := batchSize / 2
		allocs := testing.AllocsPerRun(runs, func() {
			if err := s.handle(insert); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2 {
			t.Fatalf("traced %v: the reader made %v allocations per event, want at most 2 (the row's values and headers)", traced, allocs)
		}
		if n := len(s.staged); n != runs+1 || s.staged[0].Invalid != nil {
			t.Fatalf("%d events staged (first invalid: %v), want %d valid", n, s.staged[0].Invalid, runs+1)
		}
		if traced && reads != runs+1 {
			t.Fatalf("the Read hook saw %d events as read, want %d", reads, runs+1)
		}
	}
}

// Events staged for the rest of their transaction are due to be queued
// once the first has waited StageFor (a long decode gap inside the
// transaction), not before, and never without a bound set.
func TestStagedEventsDueAfterStageFor(t *testing.T) {
	t.Parallel()
	s, insert, _ := outboxStream(t)
	if s.stageDue(time.Now().Add(time.Hour)) {
		t.Fatal("due with nothing staged")
	}
	read := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	s.readAt = read
	if err := s.handle(insert); err != nil {
		t.Fatal(err)
	}
	s.readAt = read.Add(30 * time.Second) // a later event does not move the bound
	if err := s.handle(insert); err != nil {
		t.Fatal(err)
	}
	if s.stageDue(read.Add(time.Hour)) {
		t.Fatal("due without StageFor")
	}
	s.cfg.StageFor = time.Minute
	if s.stageDue(read.Add(time.Minute - time.Nanosecond)) {
		t.Fatal("due before StageFor passed")
	}
	if !s.stageDue(read.Add(time.Minute)) {
		t.Fatal("not due once StageFor passed")
	}
}
