package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// row is one interval's figures.
type row struct {
	at                             time.Duration
	committed, delivered           int64 // totals
	duplicates                     int64 // inbox Duplicate outcomes, total
	p99, maxLatency                time.Duration
	maxLag                         time.Duration // the interval's highest lag
	backlog                        int64         // committed - delivered
	leaderRSS, standbyRSS          int64
	leaderGoroutines, leaderFDs    int
	standbyGoroutines, standbyFDs  int
	retainedWAL                    int64
	relayRestarts, consumerRestart int
}

type faultMark struct {
	at, took time.Duration // when the injection started, how long it took
	name     string
}

// stats collects the consumer's outcomes and the intervals' figures.
type stats struct {
	ledger *ledger

	mu         sync.Mutex
	processed  int64 // inbox Processed outcomes
	duplicates int64 // inbox Duplicate outcomes
	other      map[string]int64
	latencies  []time.Duration // this interval's first deliveries
	rows       []row
	faults     []faultMark
	lags       []lagSample
	lagsSeen   int // lags up to the last interval
}

func newStats() *stats {
	// Row numbers start at 1: row 0 is settled from the start.
	return &stats{other: map[string]int64{}, ledger: &ledger{commitAt: []int64{-1}, seen: []bool{false}}}
}

func (st *stats) addLag(s lagSample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lags = append(st.lags, s)
}

// readConsumer reads the consumer's lines until its stdout ends.
func (st *stats) readConsumer(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		commit, err1 := strconv.ParseInt(f[1], 10, 64)
		recv, err2 := strconv.ParseInt(f[2], 10, 64)
		n, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		// A row's first delivery counts, whatever the inbox said: a
		// consumer killed after its commit and before its line leaves a
		// row whose only line says duplicate.
		first := st.ledger.delivered(n)
		st.mu.Lock()
		if first {
			st.latencies = append(st.latencies, time.Unix(0, recv).Sub(time.UnixMilli(commit)))
		}
		switch f[0] {
		case "processed":
			st.processed++
		case "duplicate":
			st.duplicates++
		default:
			st.other[f[0]]++
		}
		st.mu.Unlock()
	}
}

// delivered is the number of distinct rows delivered.
func (st *stats) delivered() int64 { return st.ledger.deliveredRows() }

func (st *stats) fault(at, took time.Duration, name string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.faults = append(st.faults, faultMark{at, took, name})
}

func printHeader() {
	fmt.Printf("%8s %9s %9s %7s %7s %6s %9s %9s %8s %9s %5s %9s %5s %5s\n",
		"time", "committed", "delivered", "backlog", "lag", "dups", "p99", "max", "rss", "goroutine", "fds", "slot-wal", "rr", "cr")
}

// interval samples the processes and the slot and prints a line.
func (st *stats) interval(ctx context.Context, s *soak) {
	r := row{at: time.Since(s.started).Truncate(time.Second), committed: s.committed.Load()}
	st.mu.Lock()
	r.delivered, r.duplicates = st.ledger.deliveredRows(), st.duplicates
	lat := st.latencies
	st.latencies = nil
	for _, l := range st.lags[st.lagsSeen:] {
		r.maxLag = max(r.maxLag, l.lag)
	}
	st.lagsSeen = len(st.lags)
	st.mu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p99, r.maxLatency = lat[(len(lat)*99)/100], lat[len(lat)-1]
	}
	r.backlog = r.committed - r.delivered
	var leader, standby usage
	for i, p := range s.relays {
		u := sample(ctx, p.pid(), s.metrics[i])
		if u.leader && !leader.leader {
			leader = u
		} else {
			standby = u
		}
		p.mu.Lock()
		r.relayRestarts += p.restarts
		p.mu.Unlock()
	}
	r.leaderRSS, r.leaderGoroutines, r.leaderFDs = leader.rssBytes, leader.goroutines, leader.fds
	r.standbyRSS, r.standbyGoroutines, r.standbyFDs = standby.rssBytes, standby.goroutines, standby.fds
	s.consumer.mu.Lock()
	r.consumerRestart = s.consumer.restarts
	s.consumer.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = s.pool.QueryRow(qctx, `SELECT coalesce(pg_current_wal_lsn() - restart_lsn, 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&r.retainedWAL)
	cancel()
	st.mu.Lock()
	st.rows = append(st.rows, r)
	st.mu.Unlock()
	fmt.Printf("%8s %9d %9d %7d %6.1fs %6d %9s %9s %7.1fM %9d %5d %8.1fM %5d %5d\n",
		r.at, r.committed, r.delivered, r.backlog, r.maxLag.Seconds(), r.duplicates, ms(r.p99), ms(r.maxLatency),
		float64(r.leaderRSS)/(1<<20), r.leaderGoroutines, r.leaderFDs, float64(r.retainedWAL)/(1<<20), r.relayRestarts, r.consumerRestart)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms" }

func (st *stats) printTotals(s *soak) {
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Printf("\ntotals: %d rows committed (%d commits failed during faults), %d delivered to the inbox (%d processed), %d duplicate deliveries",
		s.committed.Load(), s.writeErrors.Load(), st.ledger.deliveredRows(), st.processed, st.duplicates)
	for k, v := range st.other {
		fmt.Printf(", %d %s", v, k)
	}
	fmt.Printf("; %d faults\n", len(st.faults))
	fmt.Println("(lag: the interval's highest wait of the oldest committed row not yet delivered; rr: relay restarts, cr: consumer restarts;\n rss/goroutine/fds: the leading relay; slot-wal: the slot's retained WAL)")
}

// writeFiles writes soak.csv and soak.svg into dir.
func (st *stats) writeFiles(dir string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	f, err := os.Create(filepath.Join(dir, "soak.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"seconds", "committed", "delivered", "backlog", "max_lag_ms", "duplicates", "p99_ms", "max_ms",
		"leader_rss_bytes", "leader_goroutines", "leader_fds", "standby_rss_bytes", "standby_goroutines", "standby_fds",
		"slot_retained_wal_bytes", "relay_restarts", "consumer_restarts", "fault"})
	fi := 0
	for _, r := range st.rows {
		var names []string
		for fi < len(st.faults) && st.faults[fi].at <= r.at {
			names = append(names, st.faults[fi].name)
			fi++
		}
		i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
		_ = w.Write([]string{i64(int64(r.at.Seconds())), i64(r.committed), i64(r.delivered), i64(r.backlog), i64(r.maxLag.Milliseconds()), i64(r.duplicates),
			strconv.FormatFloat(float64(r.p99)/1e6, 'f', 3, 64), strconv.FormatFloat(float64(r.maxLatency)/1e6, 'f', 3, 64),
			i64(r.leaderRSS), strconv.Itoa(r.leaderGoroutines), strconv.Itoa(r.leaderFDs),
			i64(r.standbyRSS), strconv.Itoa(r.standbyGoroutines), strconv.Itoa(r.standbyFDs),
			i64(r.retainedWAL), strconv.Itoa(r.relayRestarts), strconv.Itoa(r.consumerRestart), strings.Join(names, " ")})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.svg"), st.svg(), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", filepath.Join(dir, "soak.csv"), filepath.Join(dir, "soak.svg"))
	return nil
}
