package relay

import (
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/sink"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
)

// The skip position is the state row's confirmed LSN only when the row
// describes the slot and the server the session resumes on, and only
// until a skip overshot; in exactly-once mode the committed progress (and
// its part of a transaction) counts too.
func TestPublishedThrough(t *testing.T) {
	t.Parallel()
	r := &Relay{}
	st := &slotstate.RelayState{ConfirmedLSN: 500}
	through := func(st *slotstate.RelayState, end pglogrepl.LSN) pglogrepl.LSN {
		got, _ := r.publishedThrough(st, sink.Progress{EndLSN: end})
		return got
	}
	if got := through(nil, 0); got != 0 {
		t.Fatalf("no state row: %s, want 0", got)
	}
	if got := through(st, 0); got != 0 {
		t.Fatalf("a row of another server or timeline (not resumable): %s, want 0", got)
	}
	st.Resumable = true
	if got := through(st, 0); got != 500 {
		t.Fatalf("resumable row: %s, want its confirmed LSN 500", got)
	}
	part := publish.Position{Final: 800, Seq: 3}
	if got, p := r.publishedThrough(st, sink.Progress{EndLSN: 700, Part: part}); got != 500 || p != (publish.Position{}) {
		t.Fatalf("at-least-once with a committed progress: %s %+v, want the row's 500 and no part", got, p)
	}
	// Exactly-once: the later of the row and the committed progress.
	r.cfg.ExactlyOnce = true
	for committed, want := range map[pglogrepl.LSN]pglogrepl.LSN{0: 500, 400: 500, 700: 700} {
		if got := through(st, committed); got != want {
			t.Fatalf("exactly-once, committed progress %s: %s, want %s", committed, got, want)
		}
	}
	if _, p := r.publishedThrough(st, sink.Progress{EndLSN: 700, Part: part}); p != part {
		t.Fatalf("exactly-once: part %+v, want %+v", p, part)
	}
	st.Resumable = false
	if got := through(st, 700); got != 0 {
		t.Fatalf("exactly-once, a row of another server or timeline: %s, want 0", got)
	}
	st.Resumable = true
	r.skipOff.Store(true)
	if got, p := r.publishedThrough(st, sink.Progress{EndLSN: 700, Part: part}); got != 0 || p.Seq != 0 {
		t.Fatalf("after an overshoot: %s %+v, want nothing", got, p)
	}
}
