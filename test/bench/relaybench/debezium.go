package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// The Debezium mode's table, publication and the Outbox Event Router's
// defaults: the layout docs/migrate-from-debezium.md starts from.
const (
	dbzTable       = "outboxevent"
	dbzPublication = publication
	// dbzPartitions is each drain's topic's partition count, created
	// before the drain so neither side waits for auto-creation.
	dbzPartitions = 4
)

// dbzJVM are the Debezium JVM's flags by default: the default JIT (C2,
// not the tests' C1-only flags) and a 1 GB heap.
const dbzJVM = "-Xmx1g"

// dbzResult is one drain of the Debezium mode.
type drainFigures struct {
	label   string
	rows    int64
	elapsed time.Duration // process start → every row in Kafka
	first   time.Duration // process start → the first row in Kafka
	cpu     time.Duration
	rssKiB  int64
}

// debeziumBench drains one backlog of Debezium-layout rows (o.rows rows in
// o.txRows-row transactions) through Debezium's embedded engine (the
// Postgres connector, the Outbox Event Router and the Java producer:
// test/debezium) and through the relay (--table-format debezium), both
// on one Apache Kafka node, o.rounds drains each in the order ABBA, each
// on a slot and a topic of its own; it prints rows/s, CPU per 1k rows and
// peak RSS of each drain and the medians.
func debeziumBench(ctx context.Context, bin string, o *options, tmp string) error {
	if o.dbzSink != sinkKafka {
		return debeziumSinkBench(ctx, bin, o, tmp)
	}
	fmt.Printf("starting Postgres (wal_level=logical) and Apache Kafka...\n")
	drains := dbzOrder(o.rounds)
	srv, dbURL, pool, err := debeziumBacklogDB(ctx, drains, o)
	if err != nil {
		return err
	}
	defer srv.Stop()
	defer pool.Close()
	kafka, err := testenv.StartApacheKafka(ctx)
	if err != nil {
		return err
	}
	defer kafka.Stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var results []drainFigures
	for i, d := range drains {
		topic := fmt.Sprintf("%s_%d.order", d.label, i)
		if _, err := adm.CreateTopic(ctx, dbzPartitions, 1, nil, topic); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		var res drainFigures
		if d.label == "relay" {
			res, err = relayDebeziumDrain(ctx, bin, d.slot, dbURL, kafka.Brokers, adm, topic, o, filepath.Join(tmp, d.slot+".log"))
		} else {
			res, err = debeziumDrain(ctx, d.slot, dbURL, kafka.Brokers, adm, topic, o, filepath.Join(tmp, d.slot))
		}
		if err != nil {
			return fmt.Errorf("%s drain on %s: %w", d.label, d.slot, err)
		}
		res.print("Kafka")
		results = append(results, res)
	}
	reportSideBySide(results, []string{"relay", "debezium"}, "debezium")
	return nil
}

// debeziumBacklogDB starts Postgres, creates the bench's database and
// inserts the backlog there (debeziumBacklog), with a slot for each of
// drains. The caller stops the server and closes the pool.
func debeziumBacklogDB(ctx context.Context, drains []drain, o *options) (srv *testenv.Server, dbURL string, pool *pgxpool.Pool, err error) {
	if srv, err = testenv.StartServer(); err != nil {
		return nil, "", nil, err
	}
	defer func() {
		if err != nil {
			if pool != nil {
				pool.Close()
			}
			srv.Stop()
		}
	}()
	if dbURL, err = createDatabase(ctx, srv.AdminURL, "dbzbench"); err != nil {
		return srv, "", nil, err
	}
	if pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return srv, "", nil, err
	}
	return srv, dbURL, pool, debeziumBacklog(ctx, pool, dbURL, drains, o)
}

// debeziumBacklog creates the Debezium outbox table and a slot for each
// of drains, then inserts the backlog: every slot exists before the first
// insert, so each sees the whole backlog. relay setup makes the
// publication, the state table and the relay's slots; Debezium's are
// plain pgoutput slots, as its connector creates them.
func debeziumBacklog(ctx context.Context, pool *pgxpool.Pool, dbURL string, drains []drain, o *options) error {
	if _, err := pool.Exec(ctx, testenv.DebeziumOutboxDDL); err != nil {
		return err
	}
	for _, d := range drains {
		var err error
		if d.label == "relay" {
			err = relay.Setup(ctx, &relay.Config{DatabaseURL: dbURL, Slot: d.slot, Publication: dbzPublication,
				Table: dbzTable, TableFormat: relaytype.TableFormatDebezium})
		} else {
			_, err = pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, d.slot)
		}
		if err != nil {
			return fmt.Errorf("slot %s: %w", d.slot, err)
		}
	}
	start := time.Now()
	if err := insertDebeziumBacklog(ctx, pool, o); err != nil {
		return err
	}
	fmt.Printf("backlog: %d Debezium-layout rows (~%d B payload) in %d-row transactions inserted in %v\n",
		o.rows, o.payload, o.txRows, time.Since(start).Round(time.Millisecond))
	return nil
}

// dbzOrder lists the drains of the Debezium mode, rounds of each, in the
// order ABBA ABBA..., each on a slot of its own.
func dbzOrder(rounds int) []drain {
	var ds []drain
	for i := 1; i <= rounds; i++ {
		a := drain{label: "relay", slot: fmt.Sprintf("bench_relay_%d", i)}
		b := drain{label: "debezium", slot: fmt.Sprintf("bench_debezium_%d", i)}
		if i%2 == 0 {
			a, b = b, a
		}
		ds = append(ds, a, b)
	}
	return ds
}

// insertDebeziumBacklog inserts o.rows rows of Debezium's outbox layout,
// o.txRows to a transaction (one INSERT ... SELECT each), over o.conns
// connections.
func insertDebeziumBacklog(ctx context.Context, pool *pgxpool.Pool, o *options) error {
	next := make(chan int)
	errs := make([]error, o.conns)
	var wg sync.WaitGroup
	for c := range o.conns {
		wg.Go(func() {
			for first := range next {
				if errs[c] != nil {
					continue // drain
				}
				last := min(first+o.txRows, o.rows) - 1
				_, errs[c] = pool.Exec(ctx, `INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload)
					SELECT gen_random_uuid(), 'order', 'agg-' || (g % $3), 'OrderCreated',
					 jsonb_build_object('seq', g, 'pad', repeat('x', $4))
					FROM generate_series($1::int, $2::int) g`, first, last, o.aggregates, max(o.payload-40, 0))
			}
		})
	}
	for first := 0; first < o.rows && ctx.Err() == nil; first += o.txRows {
		next <- first
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("insert backlog: %w", err)
	}
	return ctx.Err()
}

// relayDebeziumDrain runs the relay binary on slot with --table-format
// debezium until topic holds o.rows rows.
func relayDebeziumDrain(ctx context.Context, bin, slot, dbURL string, brokers []string, adm *kadm.Client, topic string, o *options, logPath string) (drainFigures, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return drainFigures{}, err
	}
	defer logf.Close()
	args := strings.TrimSpace(o.relayArgs + " --table " + dbzTable + " --table-format debezium" +
		" --topic-template " + strings.TrimSuffix(topic, ".order") + ".{aggregate_type}")
	cmd := relayCommand(bin, slot, dbURL, kafkaArgs(brokers), args, logf)
	res, err := drainProcess(ctx, "relay", cmd, topicCount(adm, topic), int64(o.rows))
	if err != nil {
		b, _ := os.ReadFile(logPath)
		return res, fmt.Errorf("%w\nrelay log:\n%s", err, strings.TrimSpace(string(b)))
	}
	return res, nil
}

// debeziumDrain runs Debezium's embedded engine on slot (snapshot
// no_data: it streams from the slot) until topic holds o.rows rows.
func debeziumDrain(ctx context.Context, slot, dbURL string, brokers []string, adm *kadm.Client, topic string, o *options, dir string) (drainFigures, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return drainFigures{}, err
	}
	props, err := dbzConnectorProps(slot, dbURL, dir, strings.TrimSuffix(topic, ".order")+".${routedByValue}", o)
	if err != nil {
		return drainFigures{}, err
	}
	props["name"] = "outbox-connector"
	props["offset.storage"] = "org.apache.kafka.connect.storage.FileOffsetBackingStore"
	props["offset.flush.interval.ms"] = "1000"
	start := time.Now()
	d, err := testenv.RunDebezium(ctx, props, brokers, dir, strings.Fields(o.dbzJVM)...)
	if err != nil {
		return drainFigures{}, err
	}
	defer d.Kill()
	res, err := awaitRows(ctx, "debezium", d.PID(), start, topicCount(adm, topic), int64(o.rows))
	if err != nil {
		return res, fmt.Errorf("%w\nDebezium output:\n%s", err, d.Out.String())
	}
	return res, nil
}

// dbzConnectorProps are the Postgres connector's and the Outbox Event
// Router's properties of a Debezium drain on slot (snapshot no_data: it
// streams from the slot), its offsets in dir, every record routed to
// route (the router's route.topic.replacement); -debezium-batch sets
// max.batch.size (and max.queue.size 4x it).
func dbzConnectorProps(slot, dbURL, dir, route string, o *options) (map[string]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	pw, _ := u.User.Password()
	props := map[string]string{
		"connector.class":                           "io.debezium.connector.postgresql.PostgresConnector",
		"offset.storage.file.filename":              filepath.Join(dir, "offsets.dat"),
		"database.hostname":                         u.Hostname(),
		"database.port":                             u.Port(),
		"database.user":                             u.User.Username(),
		"database.password":                         pw,
		"database.dbname":                           strings.TrimPrefix(u.Path, "/"),
		"topic.prefix":                              "dbz",
		"plugin.name":                               "pgoutput",
		"slot.name":                                 slot,
		"publication.name":                          dbzPublication,
		"publication.autocreate.mode":               "disabled",
		"table.include.list":                        "public." + dbzTable,
		"snapshot.mode":                             "no_data",
		"transforms":                                "outbox",
		"transforms.outbox.type":                    "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.topic.replacement": route,
		"transforms.outbox.table.fields.additional.placement": "type:header",
	}
	if v := o.dbzBatch; v > 0 {
		props["max.batch.size"] = fmt.Sprint(v)
		props["max.queue.size"] = fmt.Sprint(4 * v)
	}
	return props, nil
}

// drainProcess starts cmd and measures it until count says the
// destination holds rows rows, then stops it with SIGTERM.
func drainProcess(ctx context.Context, label string, cmd *exec.Cmd, count func(context.Context) (int64, error), rows int64) (drainFigures, error) {
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return drainFigures{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	return awaitRows(ctx, label, cmd.Process.Pid, start, count, rows)
}

// awaitRows polls count (a topic's end offsets, a stream's length) every
// 50 ms until it says rows, and reads the process pid's CPU time and peak
// RSS then; the times are those of the polls' starts. It fails after ten minutes, or when the process is gone.
func awaitRows(ctx context.Context, label string, pid int, start time.Time, count func(context.Context) (int64, error), rows int64) (drainFigures, error) {
	res := drainFigures{label: label}
	deadline := time.Now().Add(10 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastShow := time.Now()
	for {
		// The poll's start is the time of its answer: a slow answer
		// (rabbitmqctl's) does not lengthen the drain.
		asked := time.Since(start)
		n, err := count(ctx)
		if err != nil {
			return res, err
		}
		if n > 0 && res.first == 0 {
			res.first = asked
		}
		if n >= rows {
			res.rows, res.elapsed = n, asked
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d rows after ten minutes", n, rows)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			return res, fmt.Errorf("the process exited with %d of %d rows in the broker", n, rows)
		}
		if time.Since(lastShow) > 5*time.Second {
			lastShow = time.Now()
			fmt.Printf("  ... %d rows after %v\n", n, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
	}
	var err1, err2 error
	res.cpu, err1 = cpuTime(pid)
	res.rssKiB, err2 = vmHWM(pid)
	return res, errors.Join(err1, err2)
}

// print prints one drain's figures; where is the broker ("Kafka").
func (res drainFigures) print(where string) {
	fmt.Printf("%-8s %d rows in %s after %v = %.0f rows/s (first row after %v; %s rows/s from it), CPU %v = %.4f s per 1k rows, peak RSS %.1f MiB\n",
		res.label, res.rows, where, res.elapsed.Round(time.Millisecond), float64(res.rows)/res.elapsed.Seconds(),
		res.first.Round(time.Millisecond), res.fromFirst(),
		res.cpu.Round(10*time.Millisecond), res.cpu.Seconds()/float64(res.rows)*1000, float64(res.rssKiB)/1024)
}

// fromFirst is the rate from the first row on, or "-" when the first and
// the last poll were one (the drain took less than the poll's period).
func (res drainFigures) fromFirst() string {
	if res.elapsed-res.first < 50*time.Millisecond {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(res.rows)/(res.elapsed-res.first).Seconds())
}

// reportSideBySide prints each label's medians (with their range) over
// its drains, then for every other label the ratios label/ref.
func reportSideBySide(results []drainFigures, labels []string, ref string) {
	type figs struct{ rate, fromFirst, cpu, rss []float64 }
	by := map[string]*figs{}
	for _, l := range labels {
		by[l] = &figs{}
	}
	for _, r := range results {
		f := by[r.label]
		f.rate = append(f.rate, float64(r.rows)/r.elapsed.Seconds())
		if r.fromFirst() != "-" {
			f.fromFirst = append(f.fromFirst, float64(r.rows)/(r.elapsed-r.first).Seconds())
		}
		f.cpu = append(f.cpu, r.cpu.Seconds()/float64(r.rows)*1000)
		f.rss = append(f.rss, float64(r.rssKiB)/1024)
	}
	for _, label := range labels {
		f := by[label]
		fmt.Printf("%-8s medians of %d drains: %.0f rows/s (%.0f-%.0f), from the first row %s rows/s, CPU %.4f s per 1k rows (%.4f-%.4f), peak RSS %.1f MiB (%.1f-%.1f)\n",
			label, len(f.rate), median(f.rate), slices.Min(f.rate), slices.Max(f.rate), medianRange(f.fromFirst),
			median(f.cpu), slices.Min(f.cpu), slices.Max(f.cpu), median(f.rss), slices.Min(f.rss), slices.Max(f.rss))
	}
	b := by[ref]
	for _, label := range labels {
		if label == ref {
			continue
		}
		a := by[label]
		fromFirst := "-"
		if len(a.fromFirst) > 0 && len(b.fromFirst) > 0 {
			fromFirst = fmt.Sprintf("%.2fx", median(a.fromFirst)/median(b.fromFirst))
		}
		fmt.Printf("%s/%s: drain rate %.2fx (from the first row %s), CPU per row %.3fx, peak RSS %.3fx\n", label, ref,
			median(a.rate)/median(b.rate), fromFirst, median(a.cpu)/median(b.cpu), median(a.rss)/median(b.rss))
	}
}

// medianRange is the median of xs with its range, "-" when xs is empty
// (every drain shorter than the poll's period).
func medianRange(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
}

// topicCount counts the records of topic (its end offsets).
func topicCount(adm *kadm.Client, topic string) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) { return topicEvents(ctx, adm, topic) }
}
