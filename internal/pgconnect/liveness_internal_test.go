package pgconnect

import (
	"errors"
	"testing"
	"time"
)

func TestLivenessBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		senderTimeout, statusInterval, bound, statusEvery time.Duration
	}{
		{60 * time.Second, 3 * time.Second, 30 * time.Second, 3 * time.Second}, // defaults
		{2 * time.Second, 3 * time.Second, time.Second, time.Second / 3},       // status updates follow a short bound
		{0, 3 * time.Second, DefaultLivenessBound, 3 * time.Second},            // timeout disabled
		{100 * time.Millisecond, time.Second, 50 * time.Millisecond, 50 * time.Millisecond / 3},
	} {
		bound, every := livenessBound(tc.senderTimeout, tc.statusInterval)
		if bound != tc.bound || every != tc.statusEvery {
			t.Errorf("livenessBound(%v, %v) = %v, %v; want %v, %v", tc.senderTimeout, tc.statusInterval, bound, every, tc.bound, tc.statusEvery)
		}
		// The relay stops writing by bound + statusEvery after its last
		// status update: before the server may give the slot away.
		if tc.senderTimeout > 0 && bound+every >= tc.senderTimeout {
			t.Errorf("wal_sender_timeout %v: bound %v + status interval %v leave no margin", tc.senderTimeout, bound, every)
		}
	}
}

func TestHeardAt(t *testing.T) {
	t.Parallel()
	now := time.Now()
	lv := Liveness{offset: 2 * time.Second} // the server's clock is 2s ahead
	if got := lv.HeardAt(now.Add(time.Second), now); !got.Equal(now.Add(-time.Second)) {
		t.Errorf("heardAt corrects by the offset: got %v, want %v", got.Sub(now), -time.Second)
	}
	if got := lv.HeardAt(now.Add(5*time.Second), now); !got.Equal(now) {
		t.Errorf("heardAt is never after receipt: got %v after it", got.Sub(now))
	}
}

// TestLiveChain checks the signs of life: receipt counts while unbroken,
// only server-dated signs after a break (a freeze), and vouching only
// while unbroken.
func TestLiveChain(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	t0 := time.Now()
	var l Live
	l.Begin(t0, bound)

	// Draining a backlog: old data, received continuously.
	for i := 1; i <= 20; i++ {
		recv := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		l.Heard(recv.Add(-5*time.Second), recv)
	}
	at := t0.Add(2 * time.Second)
	if err := l.Stale(at.Add(bound)); err != nil {
		t.Fatalf("reading a backlog without a break: %v", err)
	}

	// A freeze of 3s, then data sent before it: not a sign of life.
	resumed := at.Add(3 * time.Second)
	l.Heard(at.Add(-10*time.Millisecond), resumed)
	l.Vouch(resumed)
	err := l.Stale(resumed)
	if !errors.Is(err, errServerSilent) {
		t.Fatalf("after a freeze longer than the bound: stale = %v, want errServerSilent", err)
	}
	if l.chained(resumed) {
		t.Error("chained after a break")
	}

	// A fresh server message restores it.
	l.Heard(resumed, resumed)
	if err := l.Stale(resumed); err != nil {
		t.Fatalf("after a fresh server message: %v", err)
	}
	// Vouching keeps it while unbroken.
	for i := 1; i <= 10; i++ {
		l.Vouch(resumed.Add(time.Duration(i) * 300 * time.Millisecond))
	}
	if err := l.Stale(resumed.Add(3 * time.Second)); err != nil {
		t.Fatalf("vouched every 300ms: %v", err)
	}
}
