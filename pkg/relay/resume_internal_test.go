package relay

import (
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
)

// The skip position is the state row's confirmed LSN only when the row
// describes the slot and the server the session resumes on, and only
// until a skip overshot.
func TestPublishedThrough(t *testing.T) {
	t.Parallel()
	r := &Relay{}
	st := &slotstate.RelayState{ConfirmedLSN: 500}
	if got := r.publishedThrough(nil, 0); got != 0 {
		t.Fatalf("no state row: %s, want 0", got)
	}
	if got := r.publishedThrough(st, 0); got != 0 {
		t.Fatalf("a row of another server or timeline (not resumable): %s, want 0", got)
	}
	st.Resumable = true
	if got := r.publishedThrough(st, 0); got != 500 {
		t.Fatalf("resumable row: %s, want its confirmed LSN 500", got)
	}
	if got := r.publishedThrough(st, 700); got != 500 {
		t.Fatalf("at-least-once with a committed progress: %s, want the row's 500", got)
	}
	// Exactly-once: the later of the row and the committed progress.
	r.cfg.ExactlyOnce = true
	for committed, want := range map[pglogrepl.LSN]pglogrepl.LSN{0: 500, 400: 500, 700: 700} {
		if got := r.publishedThrough(st, committed); got != want {
			t.Fatalf("exactly-once, committed progress %s: %s, want %s", committed, got, want)
		}
	}
	st.Resumable = false
	if got := r.publishedThrough(st, 700); got != 0 {
		t.Fatalf("exactly-once, a row of another server or timeline: %s, want 0", got)
	}
	st.Resumable = true
	r.skipOff.Store(true)
	if got := r.publishedThrough(st, 700); got != 0 {
		t.Fatalf("after an overshoot: %s, want 0", got)
	}
}
