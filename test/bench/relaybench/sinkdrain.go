package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// startSinkBrokers starts the broker of each sink for the drain mode:
// kfake (or, with -sinks-kafka apache, Apache Kafka in a JVM of its own)
// and nats-server in this process, rabbitmq-server in its own. Stop
// them with stopBrokers.
func startSinkBrokers(ctx context.Context, sinks []string) (map[string]drainBroker, error) {
	brokers := map[string]drainBroker{}
	for _, s := range sinks {
		var (
			b   drainBroker
			err error
		)
		switch s {
		case sinkKafka:
			if sinksKafka == sinksKafkaApache {
				fmt.Printf("starting Apache Kafka...\n")
				b, err = startApacheKafkaDrainBroker(ctx)
			} else {
				b = &kafkaDrainBroker{}
			}
		case sinkNATS:
			b, err = startNATSBroker()
		case sinkRabbitMQ:
			fmt.Printf("starting rabbitmq-server...\n")
			b, err = startRabbitMQBroker(ctx, true)
		}
		if err != nil {
			stopBrokers(brokers)
			return nil, err
		}
		brokers[s] = b
	}
	return brokers, nil
}

// startNATSBroker starts an embedded nats-server in this process.
func startNATSBroker() (*natsBroker, error) {
	n, err := testenv.StartNATS()
	if err != nil {
		return nil, err
	}
	return newNATSBroker(n.URL, 0, n.Stop)
}

// stopBrokers stops every broker of brokers.
func stopBrokers(brokers map[string]drainBroker) {
	for _, b := range brokers {
		b.stop()
	}
}

// sinksDrain inserts one backlog and drains it through the relay once per
// run of sinkOrder, each run on a slot of its own and into an empty
// destination, and prints each drain's figures, each sink's medians and
// their ratios to the Kafka sink. A drain ends when the broker holds
// every row (its own count, polled every 50 ms).
func sinksDrain(ctx context.Context, bin string, o *options, tmp string) error {
	brokers, err := startSinkBrokers(ctx, o.sinkList)
	if err != nil {
		return err
	}
	defer stopBrokers(brokers)
	for _, s := range o.sinkList {
		fmt.Printf("%s: %s\n", s, brokers[s].describe())
	}
	fmt.Printf("each drain starts on an empty destination: a new kfake cluster or the Apache Kafka topic created again, the NATS and RabbitMQ streams deleted and created again\n")
	srv, dbURL, pool, err := startDatabasePool(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	defer pool.Close()
	// Every slot exists before the first insert, so each sees the whole
	// backlog.
	order := sinkOrder(o.sinkList, o.rounds)
	slots := make([]string, len(order))
	for i, s := range order {
		slots[i] = fmt.Sprintf("bench_%s_%d", s, i+1)
		if err := relay.Setup(ctx, &relay.Config{DatabaseURL: dbURL, Slot: slots[i], Publication: publication}); err != nil {
			return err
		}
	}
	// startDatabase's slot would keep the backlog's WAL for nothing.
	if err := dropSlot(ctx, pool, relaySlot); err != nil {
		return err
	}
	if err := insertReported(ctx, pool, o); err != nil {
		return err
	}
	// Past the backlog's end, a slot's confirmed position means the
	// broker confirmed every row (the RabbitMQ drain's end: see count).
	var end string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		return err
	}
	fmt.Printf("order of the drains: %s\n", strings.Join(order, " "))

	var (
		results []drainFigures
		besides []beside
	)
	for i, s := range order {
		b := brokers[s]
		if err := b.fresh(ctx); err != nil {
			return err
		}
		if r, ok := b.(*rabbitMQBroker); ok {
			r.acked, r.want = slotPast(pool, slots[i], end), int64(o.rows)
		}
		res, bs, err := sinkDrain(ctx, bin, s, slots[i], dbURL, pool, b, o, filepath.Join(tmp, slots[i]+".log"))
		if err != nil {
			return fmt.Errorf("%s drain on %s: %w", s, slots[i], err)
		}
		res.print(s)
		bs.print(res.rows)
		results = append(results, res)
		besides = append(besides, bs)
		// The slot is done: it would keep WAL for the drains after it.
		if err := dropSlot(ctx, pool, slots[i]); err != nil {
			return err
		}
	}
	fmt.Println()
	reportSideBySide(results, o.sinkList, sinkKafka)
	reportBeside(results, besides, o.sinkList)
	return nil
}

// sinkDrain runs the relay binary on slot into the broker b of sink until
// b holds o.rows rows, and measures what ran beside the relay meanwhile.
func sinkDrain(ctx context.Context, bin, sink, slot, dbURL string, pool *pgxpool.Pool, b drainBroker, o *options, logPath string) (drainFigures, beside, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return drainFigures{}, beside{}, err
	}
	defer logf.Close()
	// The slot's confirmed position ends the RabbitMQ drain (see count):
	// every sink's relay reports it every 100 ms instead of every 3 s, so
	// that it trails the broker by at most that much, for each sink alike.
	args := append(b.relayArgs(), "--status-interval", "100ms")
	cmd := relayCommand(bin, slot, dbURL, args, o.relayArgs, logf)
	m := startBeside(pool, slot, b.pid())
	if r, ok := b.(*rabbitMQBroker); ok && r.acked != nil {
		// The drain ends when the slot passed the backlog; the length
		// check after it (rabbitmqctl, a VM of its own, waiting for the
		// node's statistics) is not the drain's.
		acked := r.acked
		r.acked = func(ctx context.Context) (bool, error) {
			done, err := acked(ctx)
			if err == nil && done {
				m.poll(ctx, true)
			}
			return done, err
		}
		defer func() { r.acked = acked }()
	}
	count := func(ctx context.Context) (int64, error) {
		n, err := b.count(ctx)
		if err == nil {
			m.poll(ctx, n >= int64(o.rows))
		}
		return n, err
	}
	res, err := drainProcess(ctx, sink, cmd, count, int64(o.rows))
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return res, beside{}, fmt.Errorf("%w\nrelay log:\n%s", err, strings.TrimSpace(string(log)))
	}
	return res, m.figures, nil
}

// beside is what ran beside the relay during one drain: the CPU time of
// its walsender and of the broker's process (this process for kfake and
// the nats-server, which it embeds, and its polls), and the CPU time of
// the whole machine, all cores, not idle.
type beside struct {
	walsender, broker, busy time.Duration
	elapsed                 time.Duration
}

// besideMeter measures beside for one drain: it finds the walsender of
// the drain's slot at the first poll that sees it active and reads every
// figure at the poll that sees the last row.
type besideMeter struct {
	pool      *pgxpool.Pool
	slot      string
	broker    int
	walsender int
	start     time.Time
	broker0   time.Duration
	busy0     time.Duration
	figures   beside
	done      bool
}

func startBeside(pool *pgxpool.Pool, slot string, broker int) *besideMeter {
	if broker == 0 {
		broker = os.Getpid()
	}
	m := &besideMeter{pool: pool, slot: slot, broker: broker, start: time.Now()}
	m.broker0, _ = cpuTime(broker)
	m.busy0 = machineBusy()
	return m
}

// poll is called after each count: it looks for the walsender until it
// has it, and at the last (when every row is in) reads the figures.
func (m *besideMeter) poll(ctx context.Context, last bool) {
	if m.done {
		return
	}
	if m.walsender == 0 {
		// No row yet: the relay may not have connected.
		_ = m.pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, m.slot).Scan(&m.walsender)
	}
	if !last {
		return
	}
	m.done = true
	m.figures.elapsed = time.Since(m.start)
	if m.walsender != 0 {
		m.figures.walsender, _ = cpuTime(m.walsender)
	}
	b, _ := cpuTime(m.broker)
	m.figures.broker = b - m.broker0
	m.figures.busy = machineBusy() - m.busy0
}

// print prints what ran beside a drain of rows rows.
func (bs beside) print(rows int64) {
	fmt.Printf("         beside it: walsender %.4f s per 1k rows, broker %.4f, the machine busy %.2f of %d cores\n",
		perK(bs.walsender, rows), perK(bs.broker, rows), bs.busy.Seconds()/bs.elapsed.Seconds(), runtime.NumCPU())
}

// perK is d per 1,000 of rows, in seconds.
func perK(d time.Duration, rows int64) float64 { return d.Seconds() / float64(rows) * 1000 }

// reportBeside prints, per sink, the medians of what ran beside its
// drains: the walsender's and the broker's CPU per 1k rows and the cores
// the machine kept busy.
func reportBeside(results []drainFigures, besides []beside, labels []string) {
	type figs struct{ wal, broker, busy []float64 }
	by := map[string]*figs{}
	for _, l := range labels {
		by[l] = &figs{}
	}
	for i, r := range results {
		f, bs := by[r.label], besides[i]
		f.wal = append(f.wal, perK(bs.walsender, r.rows))
		f.broker = append(f.broker, perK(bs.broker, r.rows))
		f.busy = append(f.busy, bs.busy.Seconds()/bs.elapsed.Seconds())
	}
	for _, l := range labels {
		f := by[l]
		fmt.Printf("%-8s beside the relay (medians): walsender %.4f s per 1k rows, broker %.4f, the machine busy %.2f of %d cores (%.2f-%.2f)\n",
			l, median(f.wal), median(f.broker), median(f.busy), runtime.NumCPU(), slices.Min(f.busy), slices.Max(f.busy))
	}
}

// machineBusy is the CPU time of every core so far, idle and I/O wait
// left out (/proc/stat's first line, in USER_HZ ticks of 1/100 s).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// guest time is counted in user already.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// slotPast says whether slot's confirmed position reached lsn.
func slotPast(pool *pgxpool.Pool, slot, lsn string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		var past bool
		err := pool.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, slot, lsn).Scan(&past)
		return past, err
	}
}
