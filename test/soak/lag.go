package main

import (
	"fmt"
	"sync"
	"time"
)

// ledger knows each written row's commit and first delivery, by the
// writer's sequence number, so the soak can tell the lag: how long the
// oldest committed row not yet delivered has waited (0 when every
// committed row was delivered).
type ledger struct {
	mu       sync.Mutex
	commitAt []int64 // Unix ns when the commit returned; 0 not yet, -1 failed
	seen     []bool
	low      int // rows below are settled: delivered or failed
	distinct int64
}

func (l *ledger) grow(i int) {
	for len(l.commitAt) <= i {
		l.commitAt = append(l.commitAt, 0)
		l.seen = append(l.seen, false)
	}
}

// committed records that row n's commit returned at at.
func (l *ledger) committed(n int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grow(int(n))
	l.commitAt[n] = at.UnixNano()
}

// failed records that row n's commit failed (it may still have committed:
// then its delivery settles it all the same).
func (l *ledger) failed(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grow(int(n))
	l.commitAt[n] = -1
}

// delivered records a delivery of row n and reports whether it was the
// row's first.
func (l *ledger) delivered(n int64) bool {
	if n < 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grow(int(n))
	if l.seen[n] {
		return false
	}
	l.seen[n] = true
	l.distinct++
	return true
}

// deliveredRows is the number of distinct rows delivered.
func (l *ledger) deliveredRows() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.distinct
}

// lag is how long the oldest committed row not yet delivered has waited
// at now.
func (l *ledger) lag(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.low < len(l.seen) && (l.seen[l.low] || l.commitAt[l.low] < 0) {
		l.low++
	}
	var oldest int64
	for i := l.low; i < len(l.seen); i++ {
		if at := l.commitAt[i]; at > 0 && !l.seen[i] && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	if oldest == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(0, oldest)))
}

// lagSample is the lag at one moment of the run.
type lagSample struct {
	at, lag time.Duration
}

const (
	lagTarget = time.Second      // lag back under this …
	lagHold   = 10 * time.Second // … and staying there this long
)

// recovery is how one fault's lag went.
type recovery struct {
	fault     faultMark
	peak      time.Duration // the highest lag from the fault to the recovery's hold
	recovered time.Duration // from the fault's start until the lag was back under lagTarget for good; -1 never
}

// recoveries measures each fault: from the end of its injection, the
// first moment from which the lag stays under lagTarget for lagHold (or
// until the next fault or the end of the samples, when sooner).
func recoveries(faults []faultMark, samples []lagSample) []recovery {
	var out []recovery
	for i, f := range faults {
		until := time.Duration(1<<63 - 1)
		if i+1 < len(faults) {
			until = faults[i+1].at
		}
		r := recovery{fault: f, recovered: -1}
		end := f.at + f.took
		for k, s := range samples {
			if s.at < f.at {
				continue
			}
			if s.at >= until || (r.recovered >= 0 && s.at > f.at+r.recovered+lagHold) {
				break
			}
			r.peak = max(r.peak, s.lag)
			if r.recovered >= 0 || s.at < end {
				continue
			}
			held := s.lag < lagTarget
			for j := k + 1; held && j < len(samples) && samples[j].at < min(until, s.at+lagHold); j++ {
				held = samples[j].lag < lagTarget
			}
			if held {
				r.recovered = s.at - f.at
			}
		}
		out = append(out, r)
	}
	return out
}

// String is the recovery's line in the summary.
func (r recovery) String() string {
	back := "never (in its interval)"
	if r.recovered >= 0 {
		back = fmt.Sprintf("%6.1fs  (%.1fs after the injection ended)", r.recovered.Seconds(), (r.recovered - r.fault.took).Seconds())
	}
	return fmt.Sprintf("%8s  %-22s %6.1fs %8.1fs  %s", r.fault.at.Truncate(time.Second), r.fault.name, r.fault.took.Seconds(), r.peak.Seconds(), back)
}
