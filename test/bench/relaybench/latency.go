package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// The latency mode's writers (-writer).
const (
	writerInsert = "insert"
	writerTx     = "tx"
)

// latencyBench runs the relay binary against a kfake broker (a process of
// its own, see broker) while a writer commits single-row transactions at
// each of rates for duration, and a franz-go consumer (a process of its
// own too, see consumer; one client reading every partition)
// measures commit → receive from each record's timestamp (the
// transaction's commit time, in milliseconds). With tracePath (the relay
// is then this binary, see installTrace) it also prints each leg of that
// time per rate. With -peer-bin it measures the peer too, -rounds runs of
// each in the order ABBA, one at a time against the same database, broker
// and consumer, and prints each side's median p99 per rate and the ratio.
func latencyBench(ctx context.Context, bin string, o *options, rates []int, duration time.Duration, tmp, tracePath string) error {
	srv, dbURL, err := startDatabase(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(o.conns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	r := &latencyRun{o: o, pool: pool, logPath: filepath.Join(tmp, "relay.log"), fromReturn: o.peerBin != "" || o.sinkList != nil}
	// The brokers and their consumers, each in a process of its own.
	setup := kafkaLatency
	if o.sinkList != nil {
		setup = sinksLatency
	}
	runs, stopConsumers, err := setup(ctx, bin, dbURL, o, r.receive)
	if err != nil {
		return err
	}
	defer stopConsumers()
	if o.sinkList != nil {
		// Each sink's runs have slots of their own: startDatabase's would
		// keep WAL for nothing.
		if err := dropSlot(ctx, pool, relaySlot); err != nil {
			return err
		}
	}
	r.samples = make([]sample, len(runs)*(latencySamples(rates, duration)+30)) // warmUp writes up to 30 rows a run
	if r.w, err = outbox.NewWriter(outbox.Pgx(nil), nil); err != nil {
		return err
	}
	logf, err := os.Create(r.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	switch {
	case o.sinkList != nil:
		fmt.Printf("latency is the writer's commit return → receive, for every sink (NATS and RabbitMQ messages carry no commit time)\n")
	case r.fromReturn:
		fmt.Printf("latency is the writer's commit return → receive (the peer's record timestamps may not be commit times), for both sides\n")
	}
	stats := map[string][][]latencyStats{} // label → run → rate
	var cpuLines []string
	var ranges [][2]int
	stopLast := func() {}
	for _, run := range runs {
		if len(runs) > 1 {
			fmt.Printf("\n%s (%s):\n", run.label, filepath.Base(run.bin))
		}
		r.brokerPid = run.brokerPid
		if err := prepareSlot(ctx, dbURL, run); err != nil {
			return fmt.Errorf("%s: %w", run.label, err)
		}
		r.relay = run.cmd(logf)
		if err := r.relay.Start(); err != nil {
			return fmt.Errorf("%s: %w", run.label, err)
		}
		stopRelay := sync.OnceFunc(func() {
			_ = r.relay.Process.Signal(syscall.SIGTERM)
			_ = r.relay.Wait()
		})
		defer stopRelay()
		stopLast = stopRelay
		if err := r.warmUp(ctx, run.slot); err != nil {
			return fmt.Errorf("%s: %w", run.label, err)
		}
		rg, lines, st, err := r.rates(ctx, rates, duration)
		if err != nil {
			return err
		}
		ranges = rg
		for _, l := range lines {
			cpuLines = append(cpuLines, run.label+" "+l)
		}
		stats[run.label] = append(stats[run.label], st)
		if len(runs) > 1 {
			stopRelay()
			if err := dropSlot(ctx, pool, run.slot); err != nil {
				return fmt.Errorf("%s: drop slot %s: %w", run.label, run.slot, err)
			}
		}
	}
	fmt.Printf("\nCPU while writing (share of one core: on a CPU, and runnable but waiting for one), and the machine's runnable tasks (/proc/loadavg, every 100ms)\n")
	for _, l := range cpuLines {
		fmt.Println(l)
	}
	switch {
	case o.peerBin != "":
		reportPeer(rates, stats)
	case o.sinkList != nil:
		reportLatencies(rates, stats, o.sinkList, sinkKafka)
	}
	if tracePath == "" {
		return nil
	}
	stopConsumers()
	stopLast()
	return r.printTrace(tracePath, rates, ranges)
}

// latencyRunner is one run of the latency mode: the relay, or the peer
// of -peer-bin, on its slot.
type latencyRunner struct {
	label, bin, slot string
	cmd              func(logf *os.File) *exec.Cmd
	// brokerPid is the process of the broker it writes to.
	brokerPid int
	// setup says the bench sets up the slot (relay.Setup) before the run.
	setup bool
}

// peerSlot is the slot the peer is told to use.
const peerSlot = "bench_peer"

// Environment of the peer binary (-peer-bin): where to read and write.
const (
	envPeerDatabaseURL = "PGOUTBOX_PEER_DATABASE_URL"
	envPeerBrokers     = "PGOUTBOX_PEER_BROKERS"
	envPeerSlot        = "PGOUTBOX_PEER_SLOT"
	envPeerPublication = "PGOUTBOX_PEER_PUBLICATION"
	envPeerTable       = "PGOUTBOX_PEER_TABLE"
	envPeerTopic       = "PGOUTBOX_PEER_TOPIC"
)

// kafkaLatency starts the latency mode's kfake broker and its consumer
// (one reader per partition), and lists the runs (latencyOrder); the
// function returned stops them.
func kafkaLatency(_ context.Context, bin, dbURL string, o *options, record func(seq int, recv, commit time.Time)) ([]latencyRunner, func(), error) {
	const partitions = 3
	bk, err := startBroker(partitions)
	if err != nil {
		return nil, nil, err
	}
	cons, err := startConsumer(kafkaConsumerSpec(bk.addrs, partitions), record)
	if err != nil {
		bk.stop()
		return nil, nil, err
	}
	runs := latencyOrder(bin, dbURL, bk.addrs, o)
	for i := range runs {
		runs[i].brokerPid = bk.cmd.Process.Pid
	}
	return runs, sync.OnceFunc(func() { cons.stop(); bk.stop() }), nil
}

// latencyOrder lists the runs of the latency mode: the relay alone, or
// with -peer-bin o.rounds runs of each in the order ABBA ABBA..., each on
// a slot of its own (a slot kept from an earlier run would start with the
// rows the other side's runs wrote). The relay's first slot is the one
// startDatabase set up; setup makes a relay run's other slots, the peer
// makes its own.
func latencyOrder(bin, dbURL string, brokers []string, o *options) []latencyRunner {
	relayRun := func(slot string) latencyRunner {
		return latencyRunner{label: "relay", bin: bin, slot: slot, setup: slot != relaySlot, cmd: func(logf *os.File) *exec.Cmd {
			return relayCommand(bin, slot, dbURL, kafkaArgs(brokers), o.relayArgs, logf)
		}}
	}
	if o.peerBin == "" {
		return []latencyRunner{relayRun(relaySlot)}
	}
	peerRun := func(slot string) latencyRunner {
		return latencyRunner{label: "peer", bin: o.peerBin, slot: slot, cmd: func(logf *os.File) *exec.Cmd {
			cmd := exec.Command(o.peerBin)
			cmd.Env = append(os.Environ(), envPeerDatabaseURL+"="+dbURL, envPeerBrokers+"="+strings.Join(brokers, ","),
				envPeerSlot+"="+slot, envPeerPublication+"="+publication, envPeerTable+"=public.outbox", envPeerTopic+"="+topic)
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			return cmd
		}}
	}
	var runs []latencyRunner
	for i := range o.rounds {
		a, b := relayRun(relaySlot), peerRun(fmt.Sprintf("%s_%d", peerSlot, i+1))
		if i > 0 {
			a = relayRun(fmt.Sprintf("%s_%d", relaySlot, i+1))
		}
		if i%2 == 1 {
			a, b = b, a
		}
		runs = append(runs, a, b)
	}
	return runs
}

// prepareSlot sets up the slot of a relay run that startDatabase did not.
func prepareSlot(ctx context.Context, dbURL string, run latencyRunner) error {
	if !run.setup {
		return nil
	}
	return relay.Setup(ctx, &relay.Config{DatabaseURL: dbURL, Slot: run.slot, Publication: publication})
}

// dropSlot drops the slot of a run that ended, once its walsender is gone,
// so that it keeps no WAL for the runs after it.
func dropSlot(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // still active: its walsender is ending
	}
}

// latencyStats are one rate's percentiles of commit → receive.
type latencyStats struct{ p50, p99, max time.Duration }

// reportPeer prints, per rate, each side's median p99 over its runs (with
// the range) and the ratio relay/peer.
func reportPeer(rates []int, stats map[string][][]latencyStats) {
	fmt.Printf("\n%-9s %-32s %-32s %s\n", "rate/s", "relay p99 median (range)", "peer p99 median (range)", "relay/peer")
	for i, rate := range rates {
		var cells []string
		var meds []float64
		for _, label := range []string{"relay", "peer"} {
			xs := runsMs(stats[label], i, func(s latencyStats) time.Duration { return s.p99 })
			meds = append(meds, median(xs))
			cells = append(cells, fmt.Sprintf("%.2fms (%.2f-%.2f) of %d", median(xs), slices.Min(xs), slices.Max(xs), len(xs)))
		}
		fmt.Printf("%-9d %-32s %-32s %.2f\n", rate, cells[0], cells[1], meds[0]/meds[1])
	}
}

// reportLatencies prints, per rate, each label's median p50, p99 and max
// over its runs (the p99's range too) and, for every other label, the
// ratio of its median p99 to ref's.
func reportLatencies(rates []int, stats map[string][][]latencyStats, labels []string, ref string) {
	fmt.Printf("\n%-9s %-9s %-10s %-32s %-10s %s\n", "rate/s", "", "p50", "p99 median (range) of runs", "max", "p99 ratio")
	for i, rate := range rates {
		p99 := map[string]float64{}
		for _, label := range labels {
			p50s := runsMs(stats[label], i, func(s latencyStats) time.Duration { return s.p50 })
			p99s := runsMs(stats[label], i, func(s latencyStats) time.Duration { return s.p99 })
			maxs := runsMs(stats[label], i, func(s latencyStats) time.Duration { return s.max })
			if len(p99s) == 0 {
				continue
			}
			p99[label] = median(p99s)
			fmt.Printf("%-9d %-9s %-10s %-32s %-10s", rate, label, fmt.Sprintf("%.2fms", median(p50s)),
				fmt.Sprintf("%.2fms (%.2f-%.2f) of %d", median(p99s), slices.Min(p99s), slices.Max(p99s), len(p99s)), fmt.Sprintf("%.2fms", median(maxs)))
			if label != ref {
				fmt.Printf(" %s/%s %.2f", label, ref, p99[label]/p99[ref])
			}
			fmt.Println()
		}
	}
}

// runsMs is one figure (pick) of rate i in each run, in milliseconds.
func runsMs(runs [][]latencyStats, i int, pick func(latencyStats) time.Duration) []float64 {
	var xs []float64
	for _, run := range runs {
		xs = append(xs, float64(pick(run[i]).Microseconds())/1000)
	}
	return xs
}

// latencySamples is how many records a latency run writes at most: one
// to warm up and each rate's share, and one more a rate.
func latencySamples(rates []int, duration time.Duration) int {
	total := 1
	for _, rate := range rates {
		total += int(int64(rate)*int64(duration)/int64(time.Second)) + 1
	}
	return total
}

// latencyRun is one latency mode run: its writer, relay and broker, and
// every record's times, by the sequence number of its business key: when
// the writer began and ended its transaction, and when the consumer
// received it.
type latencyRun struct {
	o         *options
	pool      *pgxpool.Pool
	w         *outbox.Writer[pgx.Tx]
	brokerPid int       // the process of the broker the running relay writes to
	relay     *exec.Cmd // the running relay (or peer)
	logPath   string
	walsender int // the relay's walsender's pid
	// fromReturn measures from the writer's commit return instead of the
	// record's timestamp (with a peer, whose timestamps may not be commit
	// times).
	fromReturn bool

	mu       sync.Mutex
	lats     []time.Duration // commit → receive of this rate's records
	samples  []sample
	received atomic.Int64
	seq      atomic.Int64
}

// receive is the consumer's callback for each record.
func (r *latencyRun) receive(seq int, recv, commit time.Time) {
	r.received.Add(1)
	r.mu.Lock()
	r.lats = append(r.lats, recv.Sub(commit))
	if seq >= 0 && seq < len(r.samples) {
		r.samples[seq].recv = recv
	}
	r.mu.Unlock()
}

// insert commits the row of sequence number seq as -writer says.
func (r *latencyRun) insert(ctx context.Context, seq int) error {
	o := r.o
	start := time.Now()
	var err error
	if o.writer == writerTx {
		err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			_, err := r.w.InsertTx(ctx, tx, outbox.Message{AggregateType: "bench", AggregateID: fmt.Sprintf("agg-%d", seq%o.aggregates),
				EventType: "bench.created", BusinessKey: fmt.Sprintf("bk-%d", seq), Payload: payload(seq, o.payload)})
			return err
		})
	} else {
		// One round trip: the row's id comes from the column default,
		// as for producers that write the outbox in plain SQL.
		_, err = r.pool.Exec(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ($1, $2, $3, $4, $5)`,
			"bench", fmt.Sprintf("agg-%d", seq%o.aggregates), "bench.created", fmt.Sprintf("bk-%d", seq), string(payload(seq, o.payload)))
	}
	ret := time.Now()
	r.mu.Lock()
	r.samples[seq].begin, r.samples[seq].ret = start, ret
	r.mu.Unlock()
	return err
}

// warmUp writes a row every second until the consumer has one (the
// relay streams, the consumer reads: a peer may create its slot after it
// started, and miss the rows before), then finds the walsender of slot.
func (r *latencyRun) warmUp(ctx context.Context, slot string) error {
	before := r.received.Load()
	deadline := time.Now().Add(30 * time.Second)
	for next := time.Now(); r.received.Load() <= before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(r.logPath)
			return fmt.Errorf("no record received within 30s; log:\n%s", b)
		}
		if time.Now().After(next) {
			if err := r.insert(ctx, int(r.seq.Add(1))); err != nil {
				return err
			}
			next = time.Now().Add(time.Second)
		}
	}
	if err := r.pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot).Scan(&r.walsender); err != nil {
		return fmt.Errorf("the walsender of slot %s: %w", slot, err)
	}
	return nil
}

// rates writes at each rate for duration and prints a line of latencies
// each; it returns the sequence numbers each rate wrote, each rate's CPU
// line and its percentiles.
func (r *latencyRun) rates(ctx context.Context, rates []int, duration time.Duration) (ranges [][2]int, cpuLines []string, stats []latencyStats, err error) {
	fmt.Printf("%-9s %9s %9s %8s %8s %8s %8s %s\n", "rate/s", "committed", "received", "p50", "p90", "p99", "max", "backlog at end")
	ranges = make([][2]int, len(rates))
	for i, rate := range rates {
		r.mu.Lock()
		r.lats = r.lats[:0]
		r.mu.Unlock()
		base := r.received.Load()
		ranges[i][0] = int(r.seq.Load()) + 1
		use := startUsage(r.relay.Process.Pid, r.walsender, r.brokerPid)
		started := time.Now()
		committed, err := paced(ctx, rate, duration, r.o.conns, func() error { return r.insert(ctx, int(r.seq.Add(1))) })
		if err != nil {
			return nil, nil, nil, err
		}
		ranges[i][1] = int(r.seq.Load()) + 1
		cpuLines = append(cpuLines, fmt.Sprintf("%-9d %s", rate, use.stop()))
		backlog := int64(committed) - (r.received.Load() - base)
		// Let the rest arrive (bounded) before the next rate.
		until := time.Now().Add(30 * time.Second)
		for r.received.Load()-base < int64(committed) && time.Now().Before(until) {
			time.Sleep(10 * time.Millisecond)
		}
		r.mu.Lock()
		ls := slices.Clone(r.lats)
		if r.fromReturn {
			ls = ls[:0]
			for _, sm := range r.samples[ranges[i][0]:ranges[i][1]] {
				if !sm.recv.IsZero() && !sm.ret.IsZero() {
					ls = append(ls, max(sm.recv.Sub(sm.ret), 0))
				}
			}
		}
		r.mu.Unlock()
		slices.Sort(ls)
		at := func(f float64) time.Duration {
			if len(ls) == 0 {
				return 0
			}
			return ls[min(len(ls)-1, int(f*float64(len(ls))))]
		}
		stats = append(stats, latencyStats{p50: at(0.5), p99: at(0.99), max: at(1)})
		q := func(f float64) string {
			if len(ls) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fms", float64(at(f).Microseconds())/1000)
		}
		fmt.Printf("%-9d %9d %9d %8s %8s %8s %8s %d\n", rate, committed, r.received.Load()-base, q(0.5), q(0.9), q(0.99), q(1), backlog)
		r.mu.Lock()
		fmt.Printf("%-9s tail: %s\n", "", describeStalls(r.samples[ranges[i][0]:ranges[i][1]], started, stallThreshold))
		r.mu.Unlock()
	}
	return ranges, cpuLines, stats, nil
}

// printTrace prints each leg of commit → receive per rate from the
// relay's trace at tracePath, and the relay's Kafka writes.
func (r *latencyRun) printTrace(tracePath string, rates []int, ranges [][2]int) error {
	rows, err := readTrace(tracePath)
	if err != nil {
		return err
	}
	printLegs(rates, ranges, r.samples, rows)
	sum, err := writeSummary(tracePath)
	if err != nil {
		return err
	}
	fmt.Printf("relay Kafka writes (all rates): %s\n", sum)
	return nil
}

// usage samples, from its start until stop, how long the relay, the
// walsender and the broker ran on a CPU and waited for one (runnable, not
// running: /proc/PID/task/*/schedstat), and the machine's runnable tasks.
type usage struct {
	pids     [3]int // relay, walsender, broker
	start    time.Time
	before   [3]schedTimes
	runnable []int
	done     chan struct{}
	wg       sync.WaitGroup
}

func startUsage(relay, walsender, broker int) *usage {
	u := &usage{pids: [3]int{relay, walsender, broker}, start: time.Now(), done: make(chan struct{})}
	for i, pid := range u.pids {
		u.before[i] = schedStat(pid)
	}
	u.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-u.done:
				return
			case <-t.C:
			}
			// "1.00 2.00 3.00 R/T last-pid": R counts running tasks.
			b, err := os.ReadFile("/proc/loadavg")
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) < 4 {
				continue
			}
			r, _, _ := strings.Cut(f[3], "/")
			if n, err := strconv.Atoi(r); err == nil {
				u.runnable = append(u.runnable, n)
			}
		}
	})
	return u
}

// stop ends the sampling and describes it.
func (u *usage) stop() string {
	close(u.done)
	u.wg.Wait()
	el := time.Since(u.start).Seconds()
	var parts []string
	for i, name := range []string{"relay", "walsender", "broker"} {
		after := schedStat(u.pids[i])
		parts = append(parts, fmt.Sprintf("%s %.0f%% (waited %.0f%%)", name,
			100*(after.run-u.before[i].run).Seconds()/el, 100*(after.wait-u.before[i].wait).Seconds()/el))
	}
	slices.Sort(u.runnable)
	med := 0
	if len(u.runnable) > 0 {
		med = u.runnable[len(u.runnable)/2]
	}
	return fmt.Sprintf("%s; runnable tasks median %d", strings.Join(parts, ", "), med)
}

// schedTimes is how long a process's threads ran on a CPU and waited for
// one.
type schedTimes struct{ run, wait time.Duration }

// schedStat sums /proc/PID/task/*/schedstat ("run-ns wait-ns slices");
// threads that ended are not counted.
func schedStat(pid int) schedTimes {
	var st schedTimes
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		run, _ := strconv.ParseInt(f[0], 10, 64)
		wait, _ := strconv.ParseInt(f[1], 10, 64)
		st.run += time.Duration(run)
		st.wait += time.Duration(wait)
	}
	return st
}

// sample is what the bench saw of one record: when the writer began its
// transaction and when the commit returned, and when the consumer
// received it.
type sample struct {
	begin, ret, recv time.Time
}

// printLegs prints, per rate, the percentiles of each leg of commit →
// receive, from the relay's trace (rows) and the bench's samples.
func printLegs(rates []int, ranges [][2]int, samples []sample, rows map[int]*traceRow) {
	legs := []struct {
		name     string
		from, to func(s *sample, r *traceRow) time.Time
	}{
		{"begin → commit returns (writer)", func(s *sample, _ *traceRow) time.Time { return s.begin }, func(s *sample, _ *traceRow) time.Time { return s.ret }},
		{"commit → commit returns", func(_ *sample, r *traceRow) time.Time { return r.commit }, func(s *sample, _ *traceRow) time.Time { return s.ret }},
		{"commit → relay reads WAL", func(_ *sample, r *traceRow) time.Time { return r.commit }, func(_ *sample, r *traceRow) time.Time { return r.read }},
		{"read → Kafka write starts", func(_ *sample, r *traceRow) time.Time { return r.read }, func(_ *sample, r *traceRow) time.Time { return r.start }},
		{"write → acknowledged", func(_ *sample, r *traceRow) time.Time { return r.start }, func(_ *sample, r *traceRow) time.Time { return r.end }},
		{"acknowledged → consumer", func(_ *sample, r *traceRow) time.Time { return r.end }, func(s *sample, _ *traceRow) time.Time { return s.recv }},
		{"commit → consumer (total)", func(_ *sample, r *traceRow) time.Time { return r.commit }, func(s *sample, _ *traceRow) time.Time { return s.recv }},
	}
	fmt.Printf("\nlegs of commit → receive, from the relay's trace (commit: the WAL's commit time, microseconds)\n")
	fmt.Printf("%-9s %-32s %8s %8s %8s %8s %s\n", "rate/s", "leg", "p50", "p90", "p99", "max", "records")
	for i, rate := range rates {
		for _, leg := range legs {
			var ds []time.Duration
			for seq := ranges[i][0]; seq < ranges[i][1] && seq < len(samples); seq++ {
				s, r := &samples[seq], rows[seq]
				if r == nil || r.end.IsZero() || s.recv.IsZero() || s.ret.IsZero() {
					continue
				}
				ds = append(ds, leg.to(s, r).Sub(leg.from(s, r)))
			}
			slices.Sort(ds)
			q := func(f float64) string {
				if len(ds) == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2fms", float64(ds[min(len(ds)-1, int(f*float64(len(ds))))].Microseconds())/1000)
			}
			fmt.Printf("%-9d %-32s %8s %8s %8s %8s %d\n", rate, leg.name, q(0.5), q(0.9), q(0.99), q(1), len(ds))
		}
	}
}

// paced calls commit rate times a second for d over conns goroutines and
// returns how many calls succeeded. Calls that cannot start on time are
// skipped, not queued, so the offered rate is at most rate.
func paced(ctx context.Context, rate int, d time.Duration, conns int, commit func() error) (int, error) {
	jobs := make(chan struct{}, conns)
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for range jobs {
				if err := commit(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				done.Add(1)
			}
		})
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case jobs <- struct{}{}:
		default: // every connection busy: the database is the limit
		}
	}
	close(jobs)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return int(done.Load()), err
	}
	return int(done.Load()), ctx.Err()
}
