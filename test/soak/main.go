package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/pgserver"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

const (
	topic            = "outbox.soak"
	slot             = "soak"
	partitions       = 4
	brokers          = 3
	walSenderTimeout = 10 * time.Second
)

type options struct {
	duration, interval, faultEvery, warmup time.Duration
	rate, writers, aggregates              int
	seed                                   uint64
	out, relayBin, relayArgs               string
	exactlyOnce                            bool
}

func main() {
	if code, ok := runAsConsumer(); ok {
		os.Exit(code)
	}
	var o options
	flag.DurationVar(&o.duration, "duration", time.Hour, "how long the writer commits rows (faults stop a fault interval before the end)")
	flag.DurationVar(&o.interval, "interval", 0, "how often to print a line of figures (default: duration/60, at least 5s, at most 1m)")
	flag.DurationVar(&o.faultEvery, "fault-every", 0, "time between two faults (default: duration/15, at least 10s, at most 4m)")
	flag.DurationVar(&o.warmup, "warmup", 0, "no faults before this (default: the fault interval)")
	flag.IntVar(&o.rate, "rate", 200, "outbox rows committed per second, one per transaction")
	flag.IntVar(&o.writers, "writers", 4, "writer connections")
	flag.IntVar(&o.aggregates, "aggregates", 1000, "distinct aggregate IDs")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the fault order")
	flag.StringVar(&o.out, "out", "soak-out", "directory for soak.csv, soak.svg and the processes' logs")
	flag.StringVar(&o.relayBin, "relay-bin", "", "relay binary (default: go build ./cmd/relay into -out)")
	flag.StringVar(&o.relayArgs, "relay-args", "", "extra arguments of both relay run processes, space separated")
	flag.BoolVar(&o.exactlyOnce, "exactly-once", false, "run both relays with --exactly-once (relay verify, read_committed, should then find no duplicate)")
	flag.Parse()
	if flag.NArg() > 0 || o.duration <= 0 || o.rate <= 0 || o.writers <= 0 || o.aggregates <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	o.defaults()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, err := run(ctx, &o)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func (o *options) defaults() {
	clamp := func(d, lo, hi time.Duration) time.Duration { return max(lo, min(hi, d)) }
	if o.interval <= 0 {
		o.interval = clamp(o.duration/60, 5*time.Second, time.Minute)
	}
	if o.faultEvery <= 0 {
		o.faultEvery = clamp(o.duration/15, 10*time.Second, 4*time.Minute)
	}
	if o.warmup <= 0 {
		o.warmup = o.faultEvery
	}
}

// soak is one run: the processes, the cluster and the counters.
type soak struct {
	o        *options
	pg       *pgserver.Server
	pool     *pgxpool.Pool
	kafka    *kfake.Cluster
	relays   [2]*proc
	metrics  [2]string // the relays' /metrics URLs
	consumer *proc
	started  time.Time

	produceErrorsUntil atomic.Int64 // Unix nanoseconds
	committed          atomic.Int64
	writeErrors        atomic.Int64
	stats              *stats
}

// leader is the relay streaming the slot (the first when neither says so).
func (s *soak) leader() *proc {
	for i, r := range s.relays {
		if sample(context.Background(), r.pid(), s.metrics[i]).leader {
			return r
		}
	}
	return s.relays[0]
}

func run(ctx context.Context, o *options) (int, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return 0, err
	}
	if o.relayBin == "" {
		o.relayBin = filepath.Join(o.out, "relay")
		fmt.Println("building ./cmd/relay")
		b := exec.CommandContext(ctx, "go", "build", "-o", o.relayBin, "./cmd/relay")
		b.Stdout, b.Stderr = os.Stdout, os.Stderr
		if err := b.Run(); err != nil {
			return 0, fmt.Errorf("go build ./cmd/relay (run the soak from the repository root): %w", err)
		}
	}
	if o.exactlyOnce {
		// A relay without the flag would exit at once, again and again.
		help, _ := exec.CommandContext(ctx, o.relayBin, "help", "run").CombinedOutput()
		if !strings.Contains(string(help), "--exactly-once") {
			return 0, fmt.Errorf("%s run has no --exactly-once", o.relayBin)
		}
		o.relayArgs += " --exactly-once"
	}
	pg, err := pgserver.Start(ctx, "wal_sender_timeout="+walSenderTimeout.String(), "track_commit_timestamp=on")
	if err != nil {
		return 0, err
	}
	defer pg.Stop()
	s := &soak{o: o, pg: pg, stats: newStats()}
	if s.pool, err = pgxpool.New(ctx, pg.AdminURL); err != nil {
		return 0, err
	}
	defer s.pool.Close()
	s.kafka, err = kfake.NewCluster(kfake.NumBrokers(brokers), kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions), kfake.SeedTopics(partitions, topic))
	if err != nil {
		return 0, err
	}
	defer s.kafka.Close()
	s.failProduce()
	addrs := strings.Join(s.kafka.ListenAddrs(), ",")
	cfg := &relay.Config{DatabaseURL: pg.AdminURL, Kafka: relay.KafkaConfig{Brokers: s.kafka.ListenAddrs()}, Slot: slot}
	if err := relay.Setup(ctx, cfg); err != nil {
		return 0, err
	}
	if _, err := inbox.Migrate(ctx, inbox.Pgx(s.pool), ""); err != nil {
		return 0, err
	}
	if err := s.startProcesses(addrs); err != nil {
		return 0, err
	}
	defer s.stopProcesses()

	mode := "at-least-once"
	if o.exactlyOnce {
		mode = "exactly-once"
	}
	fmt.Printf("soak: %s, %s at %d rows/s, a fault every %s after %s (seed %d), figures every %s; output in %s\n",
		mode, o.duration, o.rate, o.faultEvery, o.warmup, o.seed, o.interval, o.out)
	s.started = time.Now()
	var wg sync.WaitGroup
	wctx, stopWriting := context.WithTimeout(ctx, o.duration)
	defer stopWriting()
	wg.Go(func() { s.write(wctx) })
	wg.Go(func() { s.injectFaults(wctx) })
	sctx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { s.sampleEvery(sctx) })
	sampling.Go(func() { s.sampleLag(sctx) })
	wg.Wait()
	// Drain: everything committed delivered, or a minute without progress.
	s.drain(ctx)
	stopSampling()
	sampling.Wait()
	s.stats.printTotals(s)
	s.stats.printSummary(o)
	if err := s.stats.writeFiles(o.out); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
	}
	return s.verify(ctx, addrs)
}

func (s *soak) startProcesses(addrs string) error {
	for i := range s.relays {
		name := fmt.Sprintf("relay-%c", 'a'+i)
		port, err := testenv.FreePorts(1)
		if err != nil {
			return err
		}
		s.metrics[i] = fmt.Sprintf("http://127.0.0.1:%d/metrics", port[0])
		log, err := os.Create(filepath.Join(s.o.out, name+".log"))
		if err != nil {
			return err
		}
		s.relays[i] = &proc{name: name, newCmd: func() *exec.Cmd {
			args := append([]string{"run", "--database-url", s.pg.AdminURL, "--brokers", addrs, "--slot", slot,
				"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--standby-retry-interval", "500ms", "--instance-id", name},
				strings.Fields(s.o.relayArgs)...)
			cmd := exec.Command(s.o.relayBin, args...)
			cmd.Stdout, cmd.Stderr = log, log
			return cmd
		}}
		if err := s.relays[i].start(); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	clog, err := os.Create(filepath.Join(s.o.out, "consumer.log"))
	if err != nil {
		return err
	}
	s.consumer = &proc{name: "consumer", newCmd: func() *exec.Cmd {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), envAsConsumer+"="+addrs+"|"+s.pg.AdminURL)
		cmd.Stderr = clog
		return cmd
	}, onStart: func(cmd *exec.Cmd) {
		out, err := cmd.StdoutPipe()
		if err == nil {
			go s.stats.readConsumer(out)
		}
	}}
	return s.consumer.start()
}

func (s *soak) stopProcesses() {
	for _, r := range s.relays {
		if r != nil {
			r.stop()
		}
	}
	if s.consumer != nil {
		s.consumer.stop()
	}
}

// write commits single-row transactions at the rate, from several
// connections; a failed commit (the database restarting) is counted and
// the writer goes on.
func (s *soak) write(ctx context.Context) {
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		panic(err)
	}
	var seq atomic.Int64
	var wg sync.WaitGroup
	interval := time.Duration(int64(time.Second) * int64(s.o.writers) / int64(s.o.rate))
	for range s.o.writers {
		wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				n := seq.Add(1)
				m := outbox.Message{AggregateType: "soak", AggregateID: fmt.Sprintf("a-%d", n%int64(s.o.aggregates)), EventType: "soak.tick",
					BusinessKey: fmt.Sprintf("bk-%d-%d", s.started.UnixNano(), n), Payload: fmt.Appendf(nil, `{"n": %d}`, n)}
				tx, err := s.pool.Begin(ctx)
				if err == nil {
					if _, err = w.InsertTx(ctx, tx, m); err == nil {
						err = tx.Commit(ctx)
					} else {
						_ = tx.Rollback(ctx)
					}
				}
				if err != nil {
					s.writeErrors.Add(1)
					s.stats.ledger.failed(n)
					continue
				}
				s.stats.ledger.committed(n, time.Now())
				s.committed.Add(1)
			}
		})
	}
	wg.Wait()
}

// injectFaults injects the next fault every fault interval after the
// warm-up, and none in the last interval of the run, so that the end
// shows the recovery.
func (s *soak) injectFaults(ctx context.Context) {
	sched := newSchedule(s.o.seed)
	next := s.o.warmup
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.started.Add(next))):
		}
		if next+s.o.faultEvery >= s.o.duration {
			return
		}
		f := sched.next()
		at := time.Now()
		err := f.inject(ctx, s)
		if errors.Is(err, context.Canceled) {
			return
		}
		s.stats.fault(at.Sub(s.started), time.Since(at), f.name)
		fmt.Println(faultLine(at.Sub(s.started), f, time.Since(at), err))
		// A fault that took long (a SIGSTOP) does not bring the next
		// one closer.
		next = max(next+s.o.faultEvery, time.Since(s.started)+s.o.faultEvery/2)
	}
}

// sampleEvery prints a line of figures every interval.
func (s *soak) sampleEvery(ctx context.Context) {
	tick := time.NewTicker(s.o.interval)
	defer tick.Stop()
	printHeader()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.stats.interval(ctx, s)
	}
}

// sampleLag samples the lag every 100 ms.
func (s *soak) sampleLag(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.stats.addLag(lagSample{at: now.Sub(s.started), lag: s.stats.ledger.lag(now)})
		}
	}
}

// drain waits until every committed row was delivered, or until nothing
// was delivered for a minute.
func (s *soak) drain(ctx context.Context) {
	last, since := s.stats.delivered(), time.Now()
	for time.Since(since) < time.Minute {
		d := s.stats.delivered()
		if d >= s.committed.Load() {
			return
		}
		if d != last {
			last, since = d, time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Printf("drain: %d rows committed, %d delivered after a minute without progress\n", s.committed.Load(), s.stats.delivered())
}

// verify runs `relay verify` over the whole run, printing its report; its
// exit code is the soak's.
func (s *soak) verify(ctx context.Context, addrs string) (int, error) {
	from := s.started.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	cmd := exec.CommandContext(ctx, s.o.relayBin, "verify", "--database-url", s.pg.AdminURL, "--brokers", addrs,
		"--from", from, "--to", time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano), "--grace", "1ms", "--list", "10")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Printf("\n$ relay verify --from %s --to now\n", from)
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
