package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextDoublesUpToMax(t *testing.T) {
	for _, tc := range []struct {
		first, max time.Duration
		want       []time.Duration
	}{
		{100 * time.Millisecond, time.Second, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}},
		{time.Second, time.Second, []time.Duration{time.Second, time.Second}},
		{time.Second, 0, []time.Duration{time.Second, time.Second}}, // Max below First: First
		{3 * time.Second, 10 * time.Second, []time.Duration{3 * time.Second, 6 * time.Second, 10 * time.Second}},
	} {
		b := New(tc.first, tc.max)
		for i, want := range tc.want {
			if got := b.Next(); got != want {
				t.Errorf("New(%v, %v): wait %d = %v, want %v", tc.first, tc.max, i, got, want)
			}
		}
		b.Reset()
		if got := b.Next(); got != tc.first {
			t.Errorf("after Reset: %v, want %v", got, tc.first)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep waited out an hour under a cancelled context")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep(1ms) did not wait it out")
	}
}
