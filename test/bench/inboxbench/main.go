package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// batchSize is both the consumer's BatchSize and the baseline's messages per
// transaction on the batched path.
const batchSize = 100

func main() {
	n := flag.Int("n", 50000, "messages per run")
	rounds := flag.Int("rounds", 3, "rounds; each runs every configuration once, and the figures are medians over rounds")
	parts := flag.Int("partitions", 4, "partitions per topic (one worker each)")
	pk := flag.Bool("pk", false, "give the handler's table a primary key, as business tables have")
	withSQL := flag.Bool("sql", false, "also run the inbox consumer on database/sql (pgx's stdlib driver over the same pool)")
	flag.StringVar(&handlerKind, "handler", handlerInsert, "the handler's work, the same on every side: "+handlerInsert+" (one INSERT of the payload), "+
		handlerUpdate+" (one UPDATE of a counter row per partition) or "+handlerNoop+" (no statement: the inbox's and the dedup table's own cost)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each one-message-per-transaction run of the inbox and of the dedup baseline to `FILE`.SIDE.N (N = round)")
	flag.Parse()
	if handlerKind != handlerInsert && handlerKind != handlerUpdate && handlerKind != handlerNoop {
		fmt.Fprintf(os.Stderr, "inboxbench: -handler %q: want %s, %s or %s\n", handlerKind, handlerInsert, handlerUpdate, handlerNoop)
		os.Exit(2)
	}
	if *n <= 0 || *rounds <= 0 || *parts <= 0 {
		fmt.Fprintln(os.Stderr, "inboxbench: -n, -rounds and -partitions must be positive")
		os.Exit(2)
	}
	partitions = *parts
	if err := run(*n, *rounds, *pk, *withSQL); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		os.Exit(1)
	}
}

// partitions is the partition count of every topic.
var partitions = 4

// The -handler kinds.
const (
	handlerInsert = "insert"
	handlerUpdate = "update"
	handlerNoop   = "noop"
)

// handlerKind is -handler: the work of every side's handler (see work).
var handlerKind = handlerInsert

// work is the handler's statement for a message with key and payload on
// partition part, and its arguments; "" for -handler noop.
func work(key string, part int32, payload []byte) (string, []any) {
	switch handlerKind {
	case handlerUpdate:
		return `UPDATE counter SET n = n + 1 WHERE id = $1`, []any{part}
	case handlerNoop:
		return "", nil
	}
	return `INSERT INTO effect (business_key, payload) VALUES ($1, $2)`, []any{key, payload}
}

// cpuProfile is the -cpuprofile prefix ("" for none).
var cpuProfile string

// profile starts a CPU profile of the run of c in round r when -cpuprofile
// asks for it; the returned function stops it.
func profile(c config, r int) (stop func(), err error) {
	if cpuProfile == "" || c.batch != 1 || (c.side != "inbox" && c.side != "dedup") {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", cpuProfile, c.side, r+1))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// config is one measured configuration: a side (plain or inbox) and a batch
// size (batchSize, or 1 for one message per transaction).
type config struct {
	side  string
	batch int
}

func (c config) String() string { return fmt.Sprintf("%s, batch %d", c.side, c.batch) }

// sample is one run of one configuration.
type sample struct {
	wall         time.Duration
	self, server time.Duration // CPU time of this process and of the server
}

func run(n, rounds int, pk, withSQL bool) error {
	ctx := context.Background()
	srv, err := testenv.StartServer()
	if err != nil {
		return err
	}
	defer srv.Stop()
	pool, err := pgxpool.New(ctx, srv.AdminURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		return err
	}
	ddl := `CREATE TABLE effect (business_key text NOT NULL, payload bytea NOT NULL)`
	if pk {
		ddl = `CREATE TABLE effect (business_key text PRIMARY KEY, payload bytea NOT NULL)`
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL)`); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO counter SELECT id, 0 FROM generate_series(0, $1 - 1) id`, partitions); err != nil {
		return err
	}
	// The hand-rolled dedup table of the baseline: a unique constraint on
	// the business key, claimed in the handler's transaction.
	if _, err := pool.Exec(ctx, `CREATE TABLE dedup (business_key text COLLATE "C" PRIMARY KEY)`); err != nil {
		return err
	}
	configs := []config{
		{"plain", batchSize}, {"dedup", batchSize}, {"inbox", batchSize},
		{"plain", 1}, {"dedup", 1}, {"inbox", 1},
	}
	if withSQL {
		configs = append(configs, config{"inbox-sql", batchSize}, config{"inbox-sql", 1})
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	var topics []string
	for r := range rounds {
		for _, c := range configs {
			topics = append(topics, topicName(c, r))
		}
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cpu := newCPUClock(filepath.Join(srv.Dir, "data"))

	fmt.Printf("messages per run: %d, %d rounds, %d partitions, one worker per partition, offsets committed after each DB commit; handler %s; handler table primary key: %v\n",
		n, rounds, partitions, handlerKind, pk)
	fmt.Printf("plain = franz-go PollFetches + the handler's statement + CommitRecords (no dedup, for reference); dedup = the same with a hand-rolled dedup table\n" +
		"  (INSERT INTO dedup (business_key) ... ON CONFLICT DO NOTHING, then the handler's statement, in one transaction); inbox = inboxkafka.Consumer with that handler\n")
	fmt.Printf("cpu/msg: CPU time of a whole run (group join to shutdown) over its messages; go = this process (consumers and the in-process kfake broker), pg = the PostgreSQL server\n")
	samples := map[config][]sample{}
	for r := range rounds {
		// Alternate which side goes first, so that drift on a shared
		// machine does not favour one side.
		order := slices.Clone(configs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			topic := topicName(c, r)
			if err := produce(ctx, brokers, topic, n); err != nil {
				return err
			}
			stop, err := profile(c, r)
			if err != nil {
				return err
			}
			self0, server0 := cpu.read()
			var d time.Duration
			switch c.side {
			case "inbox":
				d, err = throughInbox(ctx, brokers, pool, nil, topic, n, c.batch)
			case "inbox-sql":
				d, err = throughInbox(ctx, brokers, nil, sqlDB, topic, n, c.batch)
			default:
				d, err = baseline(ctx, brokers, pool, topic, n, c.batch, c.side == "dedup")
			}
			if err != nil {
				stop()
				return fmt.Errorf("%s: %w", topic, err)
			}
			self1, server1 := cpu.read()
			stop()
			s := sample{wall: d, self: self1 - self0, server: server1 - server0}
			samples[c] = append(samples[c], s)
			fmt.Printf("  round %d  %-20s %8.0f msg/s  (%v)%s\n", r+1, c, float64(n)/d.Seconds(), d.Round(time.Millisecond), cpuPerMessage(s, n))
		}
	}
	// Every message's work happened once: the inserted rows, the counted
	// updates, or (noop) the dedup side's claims.
	check, sides := `SELECT count(*) FROM effect`, len(configs)
	switch handlerKind {
	case handlerUpdate:
		check = `SELECT sum(n) FROM counter`
	case handlerNoop:
		check, sides = `SELECT count(*) FROM dedup`, 2
	}
	var rows int
	if err := pool.QueryRow(ctx, check).Scan(&rows); err != nil {
		return err
	}
	if want := sides * rounds * n; rows != want {
		return fmt.Errorf("%s: %d, want %d", check, rows, want)
	}

	fmt.Printf("medians over %d rounds:\n", rounds)
	for _, c := range configs {
		m := sample{
			wall:   median(samples[c], func(s sample) time.Duration { return s.wall }),
			self:   median(samples[c], func(s sample) time.Duration { return s.self }),
			server: median(samples[c], func(s sample) time.Duration { return s.server }),
		}
		fmt.Printf("  %-20s %8.0f msg/s  (%v)%s\n", c, float64(n)/m.wall.Seconds(), m.wall.Round(time.Millisecond), cpuPerMessage(m, n))
	}
	// Ratios of wall times, paired by round (both ran in the same round).
	// The CPU time of both processes per run is paired the same way; on a
	// shared machine it is steadier than the wall time.
	report := func(what string, base, in config) {
		var ratios, cpu []float64
		for r := range rounds {
			b, i := samples[base][r], samples[in][r]
			ratios = append(ratios, i.wall.Seconds()/b.wall.Seconds())
			if b.self+b.server > 0 {
				cpu = append(cpu, (i.self+i.server).Seconds()/(b.self+b.server).Seconds())
			}
		}
		slices.Sort(ratios)
		line := fmt.Sprintf("  %s: %.2fx median, %.2fx..%.2fx over rounds", what, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
		if len(cpu) == len(ratios) {
			slices.Sort(cpu)
			line += fmt.Sprintf("; cpu %.2fx median, %.2fx..%.2fx", cpu[len(cpu)/2], cpu[0], cpu[len(cpu)-1])
		}
		fmt.Println(line)
	}
	fmt.Printf("inbox time over the hand-rolled dedup baseline (target <= 1.15x):\n")
	report(fmt.Sprintf("batched (BatchSize=%d vs dedup in %d-message transactions)", batchSize, batchSize), configs[1], configs[2])
	report("one message per transaction (BatchSize=1 vs dedup, one transaction per message)", configs[4], configs[5])
	fmt.Printf("for reference, over the plain consumer without dedup:\n")
	report("batched", configs[0], configs[2])
	report("one message per transaction (vs autocommit INSERT)", configs[3], configs[5])
	if withSQL {
		fmt.Printf("the inbox on database/sql over the inbox on pgx:\n")
		report("batched", configs[2], configs[6])
		report("one message per transaction", configs[5], configs[7])
	}
	return nil
}

func topicName(c config, round int) string {
	return fmt.Sprintf("bench.%s.%d.%d", c.side, c.batch, round)
}

func cpuPerMessage(s sample, n int) string {
	if s.self == 0 {
		return ""
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
	if s.server == 0 {
		return fmt.Sprintf("  cpu/msg: go %.1fus", us(s.self))
	}
	return fmt.Sprintf("  cpu/msg: go %.1fus pg %.1fus", us(s.self), us(s.server))
}

// median returns the median of f over samples (the upper one of an even
// count).
func median(samples []sample, f func(sample) time.Duration) time.Duration {
	v := make([]time.Duration, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func produce(ctx context.Context, brokers []string, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	batch := make([]*kgo.Record, 0, 1000)
	for i := range n {
		id := strconv.Itoa(i)
		batch = append(batch, &kgo.Record{
			Key:   []byte("agg-" + strconv.Itoa(i%64)),
			Value: []byte(`{"amount":` + id + `,"currency":"EUR"}`),
			Headers: []kgo.RecordHeader{
				{Key: inbox.HeaderMessageID, Value: []byte(topic + "-" + id)},
				{Key: inbox.HeaderBusinessKey, Value: []byte(topic + "-req-" + id)},
			},
		})
		if len(batch) == cap(batch) || i == n-1 {
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// clock measures from the first handled message to the n-th.
type clock struct {
	once  sync.Once
	start time.Time
	count atomic.Int64
	done  chan struct{}
	n     int64
	end   time.Time
}

func newClock(n int) *clock { return &clock{done: make(chan struct{}), n: int64(n)} }

func (c *clock) begin() { c.once.Do(func() { c.start = time.Now() }) }

func (c *clock) tick() {
	if c.count.Add(1) == c.n {
		c.end = time.Now()
		close(c.done)
	}
}

func (c *clock) elapsed() time.Duration { return c.end.Sub(c.start) }

// baseline consumes topic without the inbox, with a franz-go client as the
// inbox's loop: per partition, up to batch queued messages are INSERTed in
// one transaction (autocommit when batch is 1), then the last offset is
// committed (synchronously). With dedup each message is first claimed in the
// dedup table, in the same transaction (one per message when batch is 1),
// and its INSERT is skipped when the key was there.
func baseline(ctx context.Context, brokers []string, pool *pgxpool.Pool, topic string, n, batch int, dedup bool) (time.Duration, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(topic), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	clk := newClock(n)
	errc := make(chan error, partitions+1)
	queues := map[int32]chan *kgo.Record{}
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	dispatched := make(chan struct{})
	defer func() { cancel(); <-dispatched; wg.Wait() }()
	go func() {
		defer close(dispatched)
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		for {
			fetches := cl.PollFetches(runCtx)
			if runCtx.Err() != nil || fetches.IsClientClosed() {
				return
			}
			for _, m := range fetches.Records() {
				clk.begin()
				q, ok := queues[m.Partition]
				if !ok {
					q = make(chan *kgo.Record, 1000)
					queues[m.Partition] = q
					wg.Add(1)
					go func() {
						defer wg.Done()
						for m := range q {
							msgs := drain(q, m, batch)
							insert := insertPlain
							if dedup {
								insert = insertDedup
							}
							if err := insert(runCtx, pool, msgs); err != nil {
								if runCtx.Err() == nil {
									errc <- err
								}
								return
							}
							for range msgs {
								clk.tick()
							}
							if err := cl.CommitRecords(runCtx, msgs[len(msgs)-1]); err != nil && runCtx.Err() == nil {
								errc <- err
								return
							}
						}
					}()
				}
				select {
				case q <- m:
				case <-runCtx.Done():
					return
				}
			}
		}
	}()
	select {
	case <-clk.done:
		return clk.elapsed(), nil
	case err := <-errc:
		return 0, err
	}
}

// drain returns first plus up to batch-1 messages already queued.
func drain(q chan *kgo.Record, first *kgo.Record, batch int) []*kgo.Record {
	msgs := []*kgo.Record{first}
	for len(msgs) < batch {
		select {
		case m, ok := <-q:
			if !ok {
				return msgs
			}
			msgs = append(msgs, m)
		default:
			return msgs
		}
	}
	return msgs
}

// businessKey returns the business-key header of m.
func businessKey(m *kgo.Record) string {
	for _, h := range m.Headers {
		if h.Key == inbox.HeaderBusinessKey {
			return string(h.Value)
		}
	}
	return ""
}

// insertDedup is the hand-rolled dedup a team would write instead of the
// inbox: claim the business key with INSERT ... ON CONFLICT DO NOTHING in
// the handler's transaction, and do the work only when the claim inserted.
func insertDedup(ctx context.Context, pool *pgxpool.Pool, msgs []*kgo.Record) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			key := businessKey(m)
			tag, err := tx.Exec(ctx, `INSERT INTO dedup (business_key) VALUES ($1) ON CONFLICT DO NOTHING`, key)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue // a duplicate
			}
			if q, args := work(key, m.Partition, m.Value); q != "" {
				if _, err := tx.Exec(ctx, q, args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func insertPlain(ctx context.Context, pool *pgxpool.Pool, msgs []*kgo.Record) error {
	if q, _ := work("", 0, nil); q == "" {
		return nil // -handler noop: nothing to write
	}
	if len(msgs) == 1 {
		q, args := work(businessKey(msgs[0]), msgs[0].Partition, msgs[0].Value)
		_, err := pool.Exec(ctx, q, args...)
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			q, args := work(businessKey(m), m.Partition, m.Value)
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// throughInbox runs the inbox consumer loop on pool, or on sqlDB when pool
// is nil.
func throughInbox(ctx context.Context, brokers []string, pool *pgxpool.Pool, sqlDB *sql.DB, topic string, n, batch int) (time.Duration, error) {
	cfg := &inbox.Config{Consumer: topic, Logger: slog.New(slog.DiscardHandler)}
	clk := newClock(n)
	if pool != nil {
		in, err := inbox.New(inbox.Pgx(pool), cfg)
		if err != nil {
			return 0, err
		}
		return consumeAll(ctx, brokers, topic, batch, in, clk, func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			clk.begin()
			q, args := work(msg.BusinessKey, int32(msg.Partition), msg.Payload)
			if q == "" {
				return "", nil
			}
			_, err := tx.Exec(ctx, q, args...)
			return "", err
		})
	}
	in, err := inbox.New(inbox.SQL(sqlDB), cfg)
	if err != nil {
		return 0, err
	}
	return consumeAll(ctx, brokers, topic, batch, in, clk, func(ctx context.Context, tx *sql.Tx, msg inbox.Message) (string, error) {
		clk.begin()
		q, args := work(msg.BusinessKey, int32(msg.Partition), msg.Payload)
		if q == "" {
			return "", nil
		}
		_, err := tx.ExecContext(ctx, q, args...)
		return "", err
	})
}

// consumeAll runs in's consumer loop with handler until clk has counted
// every message processed.
func consumeAll[TTx any](ctx context.Context, brokers []string, topic string, batch int, in *inbox.Inbox[TTx], clk *clock,
	handler inbox.TxHandler[TTx]) (time.Duration, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := inboxkafka.New(&inboxkafka.Config[TTx]{
		Brokers: brokers, GroupID: topic, Topics: []string{topic}, Inbox: in, BatchSize: batch, Handler: handler,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			if res.Outcome == inbox.Processed {
				clk.tick()
			}
		},
	})
	if err != nil {
		return 0, err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(runCtx) }()
	select {
	case <-clk.done:
		cancel()
		return clk.elapsed(), <-errc
	case err := <-errc:
		return 0, fmt.Errorf("consumer stopped early: %w", err)
	}
}
