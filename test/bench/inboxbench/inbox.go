package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// workHandler is every inbox side's handler: it starts clk and runs the
// statement of work in the claim's transaction with exec, so that each
// side times the same steps.
func workHandler[TTx any](clk *clock, exec func(ctx context.Context, tx TTx, q string, args ...any) error) inbox.TxHandler[TTx] {
	return func(ctx context.Context, tx TTx, msg inbox.Message) (string, error) {
		clk.begin()
		q, args := work(msg.BusinessKey, int32(msg.Partition), msg.Payload)
		if q == "" {
			return "", nil
		}
		return "", exec(ctx, tx, q, args...)
	}
}

// pgxHandler is workHandler on pgx.
func pgxHandler(clk *clock) inbox.TxHandler[pgx.Tx] {
	return workHandler(clk, func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
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
		return consumeAll(ctx, brokers, topic, batch, in, clk, pgxHandler(clk))
	}
	in, err := inbox.New(inbox.SQL(sqlDB), cfg)
	if err != nil {
		return 0, err
	}
	return consumeAll(ctx, brokers, topic, batch, in, clk, workHandler(clk, func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}))
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
