package main

import (
	"slices"
	"testing"
)

// Each round of the schedule injects every fault once, in an order the
// seed decides: the same seed, the same order.
func TestScheduleRounds(t *testing.T) {
	order := func(seed uint64) []string {
		s := newSchedule(seed)
		var names []string
		for range 3 * len(faults) {
			names = append(names, s.next().name)
		}
		return names
	}
	a := order(1)
	for round := range 3 {
		got := slices.Clone(a[round*len(faults) : (round+1)*len(faults)])
		slices.Sort(got)
		var want []string
		for _, f := range faults {
			want = append(want, f.name)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("round %d injects %v, want each of %v once", round, got, want)
		}
	}
	if !slices.Equal(a, order(1)) {
		t.Error("seed 1 gave two orders")
	}
	if slices.Equal(a, order(2)) {
		t.Error("seeds 1 and 2 gave the same order")
	}
}
