package main

import (
	"testing"
	"time"
)

func TestRecoveries(t *testing.T) {
	// Samples every 100 ms for 60 s: the lag climbs from 10.5 s to 3 s at
	// 13.5 s and is 0.2 s after; from 30 s it climbs and never comes back.
	var samples []lagSample
	for at := time.Duration(0); at < 60*time.Second; at += 100 * time.Millisecond {
		var lag time.Duration
		switch {
		case at >= 10500*time.Millisecond && at <= 13500*time.Millisecond:
			lag = at - 10500*time.Millisecond
		case at > 13500*time.Millisecond && at < 30*time.Second:
			lag = 200 * time.Millisecond
		case at >= 30*time.Second:
			lag = at - 30*time.Second
		}
		samples = append(samples, lagSample{at: at, lag: lag})
	}
	faults := []faultMark{
		{at: 2 * time.Second, name: "harmless"},
		{at: 10 * time.Second, took: 200 * time.Millisecond, name: "stall"},
		{at: 30 * time.Second, name: "endless"},
	}
	got := recoveries(faults, samples)
	want := []recovery{
		{fault: faults[0], peak: 0, recovered: 0},
		{fault: faults[1], peak: 3 * time.Second, recovered: 3600 * time.Millisecond},
		{fault: faults[2], peak: 29900 * time.Millisecond, recovered: -1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d recoveries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("fault %s: got peak %s, recovered %s; want %s, %s", want[i].fault.name, got[i].peak, got[i].recovered, want[i].peak, want[i].recovered)
		}
	}
}

func TestLedgerLag(t *testing.T) {
	l := &ledger{commitAt: []int64{-1}, seen: []bool{false}}
	t0 := time.Unix(1000, 0)
	if got := l.lag(t0); got != 0 {
		t.Fatalf("empty ledger lag %s", got)
	}
	l.committed(1, t0)
	l.failed(2)
	l.committed(3, t0.Add(time.Second))
	if got := l.lag(t0.Add(5 * time.Second)); got != 5*time.Second {
		t.Errorf("lag %s, want 5s (row 1)", got)
	}
	if !l.delivered(1) || l.delivered(1) {
		t.Error("row 1: want a first delivery, then a repeat")
	}
	if got := l.lag(t0.Add(5 * time.Second)); got != 4*time.Second {
		t.Errorf("lag %s, want 4s (row 3; row 2 failed)", got)
	}
	l.delivered(3)
	if got := l.lag(t0.Add(5 * time.Second)); got != 0 {
		t.Errorf("lag %s, want 0", got)
	}
	if got := l.deliveredRows(); got != 2 {
		t.Errorf("%d rows delivered, want 2", got)
	}
}
