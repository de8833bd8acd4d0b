package main

import (
	"fmt"
	"time"
)

// recoveryTarget is the target: the lag back under lagTarget
// within this of every fault.
const recoveryTarget = 10 * time.Second

// printSummary prints the run against its targets: each fault's lag
// recovery, and the relays' resources in the first and second half of the
// run (the first without the warm-up).
func (st *stats) printSummary(o *options) {
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Printf("\nfaults: lag (the wait of the oldest committed row not yet delivered) back under %s and staying there %s\n", lagTarget, lagHold)
	fmt.Printf("%8s  %-22s %7s %9s  %s\n", "at", "fault", "took", "peak lag", "back under 1 s, from the fault's start")
	fromStart, fromEnd := 0, 0
	rs := recoveries(st.faults, st.lags)
	for _, r := range rs {
		fmt.Println(r)
		if r.recovered >= 0 && r.recovered <= recoveryTarget {
			fromStart++
		}
		if r.recovered >= 0 && r.recovered-r.fault.took <= recoveryTarget {
			fromEnd++
		}
	}
	fmt.Printf("target, lag under %s within %s: %d of %d faults from the fault's start, %d of %d from the injection's end\n",
		lagTarget, recoveryTarget, fromStart, len(rs), fromEnd, len(rs))

	mid := o.duration / 2
	fmt.Printf("\nresources: maximum in %s–%s against %s–%s (target: the second within 10%% of the first)\n",
		o.warmup, mid, mid, o.duration)
	for _, m := range []struct {
		name  string
		value func(r *row) float64
		unit  string
	}{
		{"leading relay RSS", func(r *row) float64 { return float64(r.leaderRSS) / (1 << 20) }, " MiB"},
		{"leading relay goroutines", func(r *row) float64 { return float64(r.leaderGoroutines) }, ""},
		{"leading relay open fds", func(r *row) float64 { return float64(r.leaderFDs) }, ""},
		{"standby relay RSS", func(r *row) float64 { return float64(r.standbyRSS) / (1 << 20) }, " MiB"},
		{"standby relay goroutines", func(r *row) float64 { return float64(r.standbyGoroutines) }, ""},
		{"slot's retained WAL", func(r *row) float64 { return float64(r.retainedWAL) / (1 << 20) }, " MiB"},
	} {
		var first, second float64
		for i := range st.rows {
			r := &st.rows[i]
			switch v := m.value(r); {
			case r.at < o.warmup || r.at > o.duration:
			case r.at < mid:
				first = max(first, v)
			default:
				second = max(second, v)
			}
		}
		verdict := "–"
		if first > 0 {
			change := (second - first) / first * 100
			verdict = fmt.Sprintf("%+.1f%%", change)
			if change <= 10 {
				verdict += " (within 10%)"
			} else {
				verdict += " (over 10%)"
			}
		}
		fmt.Printf("  %-25s %8.1f%s  %8.1f%s  %s\n", m.name, first, m.unit, second, m.unit, verdict)
	}
}
