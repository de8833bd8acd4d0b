// Command inboxbench measures what the inbox costs: messages per second
// through the inbox consumer loop with a one-INSERT handler, against the same
// INSERT without the inbox (kafka-go FetchMessage + INSERT + CommitMessages),
// in the same run, on a throwaway Postgres server and an in-process kfake
// broker. Both sides use one worker per partition and commit each offset
// synchronously after the database write. It prints both rates and the ratio
// (target: the inbox costs at most 1.5x the baseline).
//
//	go run ./test/bench/inboxbench -n 20000 [-pk]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

const partitions = 4

func main() {
	n := flag.Int("n", 20000, "messages per run")
	pk := flag.Bool("pk", false, "give the handler's table a primary key, as business tables have")
	flag.Parse()
	if err := run(*n, *pk); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		os.Exit(1)
	}
}

func run(n int, pk bool) error {
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
	if _, err := inbox.Migrate(ctx, pool, ""); err != nil {
		return err
	}
	ddl := `CREATE TABLE effect (business_key text NOT NULL, payload bytea NOT NULL)`
	if pk {
		ddl = `CREATE TABLE effect (business_key text PRIMARY KEY, payload bytea NOT NULL)`
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "bench.plain.0", "bench.inbox.0", "bench.plain.1", "bench.inbox.1"))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	type result struct {
		name string
		d    time.Duration
	}
	var res []result
	for i, batch := range []int{batchSize, 1} {
		for _, side := range []string{"plain", "inbox"} {
			topic := fmt.Sprintf("bench.%s.%d", side, i)
			if err := produce(ctx, brokers, topic, n); err != nil {
				return err
			}
			var d time.Duration
			if side == "plain" {
				d, err = baseline(ctx, brokers, pool, topic, n, batch)
			} else {
				d, err = throughInbox(ctx, brokers, pool, topic, n, batch)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", topic, err)
			}
			res = append(res, result{fmt.Sprintf("%s, batch %d", side, batch), d})
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM effect`).Scan(&rows); err != nil {
		return err
	}
	if rows != 4*n {
		return fmt.Errorf("effect table holds %d rows, want %d", rows, 4*n)
	}
	fmt.Printf("messages per run: %d, %d partitions, one worker per partition, offsets committed after each DB commit; handler table primary key: %v\n", n, partitions, pk)
	fmt.Printf("plain = kafka-go FetchMessage + INSERT + CommitMessages; inbox = inbox.Consumer with a one-INSERT handler\n")
	for _, r := range res {
		fmt.Printf("  %-20s %8.0f msg/s  (%v)\n", r.name, float64(n)/r.d.Seconds(), r.d.Round(time.Millisecond))
	}
	fmt.Printf("inbox cost, batched (ConsumerConfig.BatchSize=%d vs plain in %d-message transactions): %.2fx (target <= 1.50x)\n",
		batchSize, batchSize, res[1].d.Seconds()/res[0].d.Seconds())
	fmt.Printf("inbox cost, one message per transaction (BatchSize=1 vs plain autocommit INSERT):     %.2fx\n",
		res[3].d.Seconds()/res[2].d.Seconds())
	return nil
}

const batchSize = 100

func produce(ctx context.Context, brokers []string, topic string, n int) error {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Transport: tr, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, Balancer: &kafka.Hash{}}
	defer w.Close()
	batch := make([]kafka.Message, 0, 1000)
	for i := range n {
		id := strconv.Itoa(i)
		batch = append(batch, kafka.Message{
			Key:   []byte("agg-" + strconv.Itoa(i%64)),
			Value: []byte(`{"amount":` + id + `,"currency":"EUR"}`),
			Headers: []kafka.Header{
				{Key: inbox.HeaderMessageID, Value: []byte(topic + "-" + id)},
				{Key: inbox.HeaderBusinessKey, Value: []byte(topic + "-req-" + id)},
			},
		})
		if len(batch) == cap(batch) || i == n-1 {
			if err := w.WriteMessages(ctx, batch...); err != nil {
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

// baseline consumes topic without the inbox: per partition, up to batch
// queued messages are INSERTed in one transaction (autocommit when batch is
// 1), then the last offset is committed.
func baseline(ctx context.Context, brokers []string, pool *pgxpool.Pool, topic string, n, batch int) (time.Duration, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: topic, GroupTopics: []string{topic},
		StartOffset: kafka.FirstOffset, MaxWait: 250 * time.Millisecond})
	defer r.Close()
	clk := newClock(n)
	errc := make(chan error, partitions+1)
	queues := map[int]chan kafka.Message{}
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
			m, err := r.FetchMessage(runCtx)
			if err != nil {
				return
			}
			clk.begin()
			q, ok := queues[m.Partition]
			if !ok {
				q = make(chan kafka.Message, 1000)
				queues[m.Partition] = q
				wg.Add(1)
				go func() {
					defer wg.Done()
					for m := range q {
						msgs := drain(q, m, batch)
						if err := insertPlain(runCtx, pool, msgs); err != nil {
							if runCtx.Err() == nil {
								errc <- err
							}
							return
						}
						for range msgs {
							clk.tick()
						}
						if err := r.CommitMessages(runCtx, msgs[len(msgs)-1]); err != nil && runCtx.Err() == nil {
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
	}()
	select {
	case <-clk.done:
		return clk.elapsed(), nil
	case err := <-errc:
		return 0, err
	}
}

// drain returns first plus up to batch-1 messages already queued.
func drain(q chan kafka.Message, first kafka.Message, batch int) []kafka.Message {
	msgs := []kafka.Message{first}
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

func insertPlain(ctx context.Context, pool *pgxpool.Pool, msgs []kafka.Message) error {
	const insert = `INSERT INTO effect (business_key, payload) VALUES ($1, $2)`
	key := func(m kafka.Message) string {
		for _, h := range m.Headers {
			if h.Key == inbox.HeaderBusinessKey {
				return string(h.Value)
			}
		}
		return ""
	}
	if len(msgs) == 1 {
		_, err := pool.Exec(ctx, insert, key(msgs[0]), msgs[0].Value)
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			if _, err := tx.Exec(ctx, insert, key(m), m.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

func throughInbox(ctx context.Context, brokers []string, pool *pgxpool.Pool, topic string, n, batch int) (time.Duration, error) {
	in, err := inbox.New(&inbox.Config{Consumer: topic, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	clk := newClock(n)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := inbox.NewConsumer(&inbox.ConsumerConfig{
		Brokers: brokers, GroupID: topic, Topics: []string{topic}, Inbox: in, DB: pool, BatchSize: batch,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			clk.begin()
			_, err := tx.Exec(ctx, `INSERT INTO effect (business_key, payload) VALUES ($1, $2)`, msg.BusinessKey, msg.Payload)
			return "", err
		},
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
