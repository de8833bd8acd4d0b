package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// produce writes n records to topic, each with a message ID and a business
// key of its own.
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

// insertPlain runs the handler's statement of each message without dedup:
// in autocommit mode for one message, in one transaction for more.
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
