package main

import (
	"fmt"
	"slices"
	"time"
)

// stallGap is how far apart in commit time two slow records may be and
// still belong to one stall.
const stallGap = 20 * time.Millisecond

// stall is a run of slow records: records whose commit return → receive
// exceeded the threshold, each within stallGap of the one before.
type stall struct {
	start, end time.Time // the first and last slow record's commit return
	records    int
	worst      time.Duration
}

// describeStalls says where a rate's tail comes from: the records slower
// than threshold (commit return → receive), grouped into stalls, and the
// longest stalls with their offset from from. One long stall (a pause
// somewhere) and many short ones (steady queueing) call for different
// fixes.
func describeStalls(samples []sample, from time.Time, threshold time.Duration) string {
	var slow []sample
	for _, s := range samples {
		if !s.recv.IsZero() && !s.ret.IsZero() && s.recv.Sub(s.ret) > threshold {
			slow = append(slow, s)
		}
	}
	if len(slow) == 0 {
		return fmt.Sprintf("no record over %v", threshold)
	}
	slices.SortFunc(slow, func(a, b sample) int { return a.ret.Compare(b.ret) })
	var stalls []stall
	for _, s := range slow {
		lat := s.recv.Sub(s.ret)
		if n := len(stalls); n > 0 && s.ret.Sub(stalls[n-1].end) <= stallGap {
			st := &stalls[n-1]
			st.end, st.records, st.worst = s.ret, st.records+1, max(st.worst, lat)
			continue
		}
		stalls = append(stalls, stall{start: s.ret, end: s.ret, records: 1, worst: lat})
	}
	slices.SortFunc(stalls, func(a, b stall) int { return b.records - a.records })
	out := fmt.Sprintf("%d records over %v in %d stalls; largest:", len(slow), threshold, len(stalls))
	for _, st := range stalls[:min(3, len(stalls))] {
		out += fmt.Sprintf(" [at %.2fs, %d records over %v, worst %.1fms]", st.start.Sub(from).Seconds(), st.records,
			st.end.Sub(st.start).Round(time.Millisecond), float64(st.worst.Microseconds())/1000)
	}
	return out
}

// stallThreshold is the latency above which a record counts as slow in
// the tail line: above the steady p99 of a good run at 5,000 tx/s (about
// 2.5 ms on two cores).
const stallThreshold = 5 * time.Millisecond
