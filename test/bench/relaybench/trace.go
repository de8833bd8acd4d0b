package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
)

// envTrace names the file a relaybench process started as the relay
// writes its trace to (see installTrace).
const envTrace = "RELAYBENCH_TRACE"

// traceRow is what the relay's trace says of one event, by the sequence
// number of its business key ("bk-N"): its commit time (from the WAL, in
// microseconds), when its WAL message was read, and when the Kafka write
// that acknowledged it started and returned.
type traceRow struct {
	commit, read, start, end time.Time
}

// installTrace returns ctx carrying relaytrace hooks that record every
// event of a relay run under it in memory, and a function that writes the
// records to path (at the relay's exit, so the file's writing costs the
// relay nothing while it runs).
func installTrace(ctx context.Context, path string) (context.Context, func() error) {
	type rec struct {
		write bool
		seq   int
		a, b  int64
	}
	var (
		mu   sync.Mutex
		recs = make([]rec, 0, 1<<20)
	)
	var h relaytrace.Hooks
	h.Read = func(msg publish.Record, commit, read time.Time) {
		if seq, ok := traceSeq(&msg); ok {
			mu.Lock()
			recs = append(recs, rec{false, seq, commit.UnixNano(), read.UnixNano()})
			mu.Unlock()
		}
	}
	h.Written = func(msgs []*publish.Record, start, end time.Time, err error) {
		if err != nil {
			return
		}
		mu.Lock()
		for i := range msgs {
			if seq, ok := traceSeq(msgs[i]); ok {
				recs = append(recs, rec{true, seq, start.UnixNano(), end.UnixNano()})
			}
		}
		mu.Unlock()
	}
	return relaytrace.WithHooks(ctx, &h), func() error {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for _, r := range recs {
			kind := "R"
			if r.write {
				kind = "W"
			}
			fmt.Fprintf(w, "%s %d %d %d\n", kind, r.seq, r.a, r.b)
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

// traceSeq is the sequence number of msg's business key, "bk-N".
func traceSeq(msg *publish.Record) (int, bool) {
	for _, h := range msg.Headers {
		if h.Key == "business-key" {
			return businessKeySeq(h.Value)
		}
	}
	return 0, false
}

// businessKeySeq is the sequence number of a business key, "bk-N".
func businessKeySeq(v []byte) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(string(v), "bk-"))
	return n, err == nil
}

// scanTrace calls fn with each line of the trace file at path: its kind
// ("R" read, "W" written), the event's sequence number and two times in
// nanoseconds.
func scanTrace(path string, fn func(kind string, seq int, a, b int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var (
			kind string
			seq  int
			a, b int64
		)
		if _, err := fmt.Sscan(sc.Text(), &kind, &seq, &a, &b); err != nil {
			return fmt.Errorf("trace %s: %q: %w", path, sc.Text(), err)
		}
		fn(kind, seq, a, b)
	}
	return sc.Err()
}

// readTrace reads the trace file the relay wrote: the first read and the
// first acknowledged write of each event.
func readTrace(path string) (map[int]*traceRow, error) {
	rows := make(map[int]*traceRow)
	err := scanTrace(path, func(kind string, seq int, a, b int64) {
		r := rows[seq]
		if r == nil {
			r = &traceRow{}
			rows[seq] = r
		}
		switch {
		case kind == "R" && r.read.IsZero():
			r.commit, r.read = time.Unix(0, a), time.Unix(0, b)
		case kind == "W" && r.start.IsZero():
			r.start, r.end = time.Unix(0, a), time.Unix(0, b)
		}
	})
	return rows, err
}

// writeSummary describes the relay's Kafka writes in the trace at path:
// how many, and the records per write.
func writeSummary(path string) (string, error) {
	perWrite := make(map[[2]int64]int) // records by (start, end) of their write
	err := scanTrace(path, func(kind string, _ int, a, b int64) {
		if kind == "W" {
			perWrite[[2]int64{a, b}]++
		}
	})
	if err != nil {
		return "", err
	}
	sizes := make([]int, 0, len(perWrite))
	total := 0
	for _, n := range perWrite {
		sizes = append(sizes, n)
		total += n
	}
	if len(sizes) == 0 {
		return "none", nil
	}
	slices.Sort(sizes)
	q := func(f float64) int { return sizes[min(len(sizes)-1, int(f*float64(len(sizes))))] }
	return fmt.Sprintf("%d writes of %d records: records per write mean %.1f, p10 %d, p50 %d, p90 %d, max %d",
		len(sizes), total, float64(total)/float64(len(sizes)), q(0.1), q(0.5), q(0.9), sizes[len(sizes)-1]), nil
}
