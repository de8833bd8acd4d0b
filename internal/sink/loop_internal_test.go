package sink

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/queue"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
)

// scripted is a publisher whose answers a test decides: answer gives the
// outcome of a record (by its value) at each write; it keeps the values
// of the records it confirmed, in order, by topic.
type scripted struct {
	answer func(r *publish.Record) publish.Outcome
	kept   map[string][]string
	writes int
}

func (p *scripted) Open(context.Context, publish.Session) error { return nil }
func (p *scripted) Close()                                      {}
func (p *scripted) Write(_ context.Context, recs []*publish.Record, out []publish.Outcome) error {
	p.writes++
	for i, r := range recs {
		out[i] = p.answer(r)
		if out[i].Verdict == publish.Confirmed {
			p.kept[r.Topic] = append(p.kept[r.Topic], string(r.Value))
		}
	}
	return nil
}

// newLoopTest is a sink on a scripted publisher: the loop alone, no broker.
func newLoopTest(t *testing.T, answer func(r *publish.Record) publish.Outcome) (*sinkTest, *scripted) {
	t.Helper()
	c := testConfig(nil)
	c.Publisher, c.RetryBackoff, c.MaxRetryBackoff = "scripted", time.Millisecond, time.Millisecond
	m := relaymetrics.NewMetrics(c.Slot, &pgconnect.Live{})
	c.DeadLetters.Invalid = m.Invalid
	s := NewSink(c, m)
	p := &scripted{answer: answer, kept: map[string][]string{}}
	s.pub, s.pubErr = p, nil
	return &sinkTest{Sink: s, q: queue.NewQueue(100, 16<<20, prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"})), tr: acktrack.New(0)}, p
}

// The loop's dead-letter decision needs no broker: a record the
// publisher refuses for its own sake is dead-lettered in its place (its
// value kept, the reason in dlq-reason), a record refused as too large
// loses its value, a retry is written again, and the records of the key
// after them are written again after them, so the last copies keep commit
// order (see Ordering in the package doc); every event is acknowledged.
func TestLoopDeadLettersRefusedRecords(t *testing.T) {
	t.Parallel()
	retried := false
	var reasons []string
	st, p := newLoopTest(t, func(r *publish.Record) publish.Outcome {
		switch {
		case r.Topic == "outbox.dlq":
			for _, h := range r.Headers {
				if h.Key == contract.HeaderDLQReason {
					reasons = append(reasons, string(h.Value))
				}
			}
		case string(r.Value) == "100/1":
			return publish.Outcome{Verdict: publish.Refused, Err: errors.New("policy")}
		case string(r.Value) == "100/3":
			return publish.Outcome{Verdict: publish.Refused, Reason: publish.ReasonTooLarge, Err: errors.New("too large")}
		case string(r.Value) == "100/4" && !retried:
			retried = true
			return publish.Outcome{Verdict: publish.Retry, Err: errors.New("leader moved")}
		}
		return publish.Outcome{}
	})
	st.tx(t, "t", 6, 100, false)
	st.run(t)
	if got, want := lastCopies(p.kept["t"]), []string{"100/0", "100/2", "100/4", "100/5"}; !slices.Equal(got, want) {
		t.Errorf("topic t holds %q: last copies %q, want %q", p.kept["t"], got, want)
	}
	if got := p.kept["outbox.dlq"]; !slices.Equal(got, []string{"100/1", ""}) {
		t.Errorf("dead letters hold %q, want the refused row's value, then none (too large)", got)
	}
	if !slices.Equal(reasons, []string{"kafka-rejected", "too-large"}) {
		t.Errorf("dead-letter reasons %q", reasons)
	}
	if got := st.tr.Confirmed(); got != 100 {
		t.Errorf("confirmed %d, want 100: every event acknowledged", got)
	}
}

// A publisher's fatal answer ends Run with a permanent error and
// acknowledges nothing of the batch.
func TestLoopStopsOnFatal(t *testing.T) {
	t.Parallel()
	st, _ := newLoopTest(t, func(*publish.Record) publish.Outcome {
		return publish.Outcome{Verdict: publish.Fatal, Err: errors.New("credentials refused")}
	})
	st.tx(t, "t", 2, 100, false)
	st.q.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Run(ctx, st.q, st.tr); err == nil || !relayerr.IsPermanent(err) {
		t.Fatalf("Run: %v, want a permanent error", err)
	}
	if got := st.tr.Confirmed(); got != 0 {
		t.Errorf("confirmed %d, want 0", got)
	}
}

// lastCopies is vs in the order of the last copy of each value.
func lastCopies(vs []string) []string {
	var out []string
	for i, v := range vs {
		if !slices.Contains(vs[i+1:], v) {
			out = append(out, v)
		}
	}
	return out
}
