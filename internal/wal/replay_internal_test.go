package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/decode/pgoutputtest"
	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// skipStream is a stream over the fuzz seeds' outbox that starts at start
// and skips through through, logging to log.
func skipStream(t *testing.T, start, through pglogrepl.LSN, log *bytes.Buffer) (*skipTest, prometheus.Counter) {
	t.Helper()
	return skipPartStream(t, start, through, publish.Position{}, log)
}

// skipPartStream is skipStream that also skips the part of one
// transaction that part names.
func skipPartStream(t *testing.T, start, through pglogrepl.LSN, part publish.Position, log *bytes.Buffer) (*skipTest, prometheus.Counter) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(log, nil))
	skipped := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_replay_skipped_total"})
	s := newTestStream(logger, start)
	s.skip = newReplaySkip(through, part, start, logger, skipped)
	if err := s.handle(pgoutputtest.Relation(16385, "public", "outbox", pgoutputtest.Cols, pgoutputtest.Types)); err != nil {
		t.Fatal(err)
	}
	return &skipTest{Stream: s, events: s.queue.Events}, skipped
}

// skipTest is a stream and the queue it writes to.
type skipTest struct {
	*Stream
	events chan []decode.Event
}

// tx feeds one transaction of n rows whose commit record spans final..end.
func (s *skipTest) feed(final, end uint64, n int) error {
	row := pgoutputtest.Insert(16385, [][]byte{[]byte("0190f0e0-0000-7000-8000-000000000001"), []byte("order"), []byte("agg-1"),
		[]byte("order.created"), []byte("bk-1"), []byte(`{}`), nil, nil, []byte("2026-11-30 16:56:09+00")})
	msgs := [][]byte{pgoutputtest.Begin(final, 1000, 7)}
	for range n {
		msgs = append(msgs, row)
	}
	for _, m := range append(msgs, pgoutputtest.Commit(final, end, 1000)) {
		if err := s.handle(m); err != nil {
			return err
		}
	}
	return nil
}

// queued counts the events the stream queued for the sink.
func (s *skipTest) queued() int { return len(s.queuedEvents()) }

// queuedEvents takes the events the stream queued for the sink.
func (s *skipTest) queuedEvents() []decode.Event {
	var all []decode.Event
	for {
		select {
		case evs := <-s.events:
			all = append(all, evs...)
		default:
			return all
		}
	}
}

// A replay skips the transactions that end at or before the skip
// position: it queues none of their events, confirmation passes them at
// once, they are counted and logged once; the first transaction past it is
// published, and so is everything after.
func TestReplaySkip(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s, skipped := skipStream(t, 100, 300, &log)
	for _, tx := range []struct {
		final, end uint64
		rows       int
		confirmed  uint64
		queued     int
	}{
		{150, 200, 1, 200, 0},
		{250, 300, 2, 300, 0}, // ends at the skip position: Kafka has it
		{300, 350, 1, 300, 1}, // past it: published, confirmed once acknowledged
		{360, 370, 0, 300, 0},
	} {
		if err := s.feed(tx.final, tx.end, tx.rows); err != nil {
			t.Fatal(err)
		}
		if got, q := s.tracker.Confirmed(), s.queued(); got != tx.confirmed || q != tx.queued {
			t.Fatalf("after the transaction %d..%d: confirmed %d, %d events queued; want %d, %d", tx.final, tx.end, got, q, tx.confirmed, tx.queued)
		}
	}
	if v := testutil.ToFloat64(skipped); v != 2 {
		t.Fatalf("replay_skipped_total = %v, want 2", v)
	}
	s.skip.done() // the session's end
	if n := strings.Count(log.String(), "skipped replayed transactions"); n != 1 || !strings.Contains(log.String(), "transactions=2 events=3") {
		t.Fatalf("want one log line for 2 transactions, 3 events; log:\n%s", log.String())
	}
}

// A keepalive past the skip position ends the skipping (and logs it);
// nothing is skipped without a position past the start.
func TestReplaySkipEnds(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s, _ := skipStream(t, 100, 300, &log)
	if err := s.feed(150, 200, 1); err != nil {
		t.Fatal(err)
	}
	s.skip.passed(250)
	if s.skip.over {
		t.Fatal("a keepalive before the skip position ended the skipping")
	}
	s.skip.passed(300)
	if !s.skip.over || !strings.Contains(log.String(), "transactions=1") {
		t.Fatalf("a keepalive at the skip position did not end the skipping; log:\n%s", log.String())
	}
	if newReplaySkip(100, publish.Position{}, 100, slog.Default(), nil) != nil || newReplaySkip(0, publish.Position{}, 100, slog.Default(), nil) != nil {
		t.Fatal("a skip position not past the start skips")
	}
	var none *replaySkip // a nil skip skips nothing
	none.begin(1)
	if none.skipping() || none.commit(2) != nil {
		t.Fatal("a nil replaySkip skipped")
	}
}

// A transaction judged skipped at its BEGIN that ends past the skip
// position (the position was not where a commit ends) is never confirmed:
// the session ends with errSkipOvershoot.
func TestReplaySkipOvershoot(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s, skipped := skipStream(t, 100, 300, &log)
	err := s.feed(250, 320, 1)
	if !errors.Is(err, errSkipOvershoot) {
		t.Fatalf("handle: %v, want errSkipOvershoot", err)
	}
	if got := s.tracker.Confirmed(); got != 100 || !s.skip.overshot || testutil.ToFloat64(skipped) != 0 {
		t.Fatalf("confirmed %d (want 100), overshot %v, skipped %v", got, s.skip.overshot, testutil.ToFloat64(skipped))
	}
}

// A transaction Kafka holds in part (committed in parts by an exactly-once
// relay): its first events are dropped, the rest published with their
// positions, and the skipping ends after it. Should it hold fewer events
// than the part, it is an overshoot: never confirmed.
func TestReplaySkipPart(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s, skipped := skipPartStream(t, 100, 200, publish.Position{Final: 250, Seq: 3}, &log)
	if err := s.feed(150, 200, 2); err != nil {
		t.Fatal(err)
	}
	if q := s.queued(); q != 0 {
		t.Fatalf("%d events queued of a transaction before the skip position", q)
	}
	s.skip.passed(250) // a keepalive at part's commit record: not past it
	if s.skip.over {
		t.Fatal("a keepalive before part's transaction ended the skipping")
	}
	if err := s.feed(250, 300, 5); err != nil {
		t.Fatal(err)
	}
	evs := s.queuedEvents()
	if len(evs) != 2 || evs[0].Record.Pos != (publish.Position{Final: 250, Seq: 3}) || evs[1].Record.Pos.Seq != 4 {
		t.Fatalf("queued %d events (%+v), want the events 3 and 4 of the transaction at 250", len(evs), evs)
	}
	if !s.skip.over || testutil.ToFloat64(skipped) != 2 || !strings.Contains(log.String(), "part_events=3") {
		t.Fatalf("skipping over %v, skipped %v; log:\n%s", s.skip.over, testutil.ToFloat64(skipped), log.String())
	}
	if err := s.feed(310, 320, 1); err != nil || s.queued() != 1 {
		t.Fatalf("the transaction after the part: %v", err)
	}

	short, _ := skipPartStream(t, 100, 200, publish.Position{Final: 250, Seq: 3}, &log)
	if err := short.feed(250, 300, 2); !errors.Is(err, errSkipOvershoot) || !short.skip.overshot || short.tracker.Confirmed() != 100 {
		t.Fatalf("a transaction shorter than its part: %v, overshot %v, confirmed %d", err, short.skip.overshot, short.tracker.Confirmed())
	}
	if newReplaySkip(300, publish.Position{Final: 250, Seq: 3}, 100, slog.Default(), nil).part.Seq != 0 {
		t.Fatal("a part before the skip position was kept")
	}
}
