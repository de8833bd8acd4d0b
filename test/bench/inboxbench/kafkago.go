package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafkago"
)

// throughKafkaGo consumes topic with one kafka-go Reader per partition in
// one consumer group, each running the loop of the inboxkafkago example:
// FetchMessage, inboxkafkago.Record, Inbox.Process with the handler in one
// transaction per message, DeadLetterWriter.Settle, and CommitMessages once
// settled. Offsets are committed every second (CommitInterval), as the kgo
// loop commits marked offsets in the background.
func throughKafkaGo(ctx context.Context, brokers []string, pool *pgxpool.Pool, topic string, n int) (time.Duration, error) {
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: topic, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	dlq, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[pgx.Tx]{Brokers: brokers, Inbox: in})
	if err != nil {
		return 0, err
	}
	defer dlq.Close()
	clk := newClock(n)
	handler := pgxHandler(clk)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, partitions)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: brokers, GroupID: topic, Topic: topic, StartOffset: kafka.FirstOffset,
			MaxWait: time.Second, CommitInterval: time.Second, HeartbeatInterval: 100 * time.Millisecond,
			JoinGroupBackoff: 100 * time.Millisecond, IsolationLevel: kafka.ReadCommitted,
			Dialer: &kafka.Dialer{Timeout: 10 * time.Second},
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			err := readerLoop(runCtx, r, in, dlq, handler, clk)
			if runCtx.Err() == nil {
				errc <- err
			}
		}()
	}
	select {
	case <-clk.done:
		cancel()
		return clk.elapsed(), nil
	case err := <-errc:
		return 0, fmt.Errorf("kafka-go reader stopped early: %w", err)
	}
}

// readerLoop is the consume loop of the inboxkafkago example, counting
// each Processed message on clk. It returns only when the reader, the
// inbox or ctx stops it, so it never returns nil.
func readerLoop(ctx context.Context, r *kafka.Reader, in *inbox.Inbox[pgx.Tx], dlq *inbox.DeadLetterWriter,
	handler inbox.TxHandler[pgx.Tx], clk *clock) error {
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return err
		}
		if rec, ok := inboxkafkago.Record(m); ok {
			res, err := inbox.Deliver(ctx, in, dlq, rec, handler)
			if err != nil {
				return err
			}
			if res.Outcome == inbox.Processed {
				clk.tick()
			}
		}
		if err := r.CommitMessages(context.WithoutCancel(ctx), m); err != nil {
			return err
		}
	}
}
