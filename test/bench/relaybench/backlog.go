package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// insertBacklog inserts o.rows outbox rows in o.txRows-row transactions
// (COPY) over o.conns connections.
func insertBacklog(ctx context.Context, pool *pgxpool.Pool, o *options) error {
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		return err
	}
	txs := (o.rows + o.txRows - 1) / o.txRows
	next := make(chan int)
	errs := make([]error, o.conns)
	var wg sync.WaitGroup
	for c := range o.conns {
		wg.Go(func() {
			for t := range next {
				if errs[c] != nil {
					continue // drain
				}
				n := min(o.txRows, o.rows-t*o.txRows)
				msgs := make([]outbox.Message, n)
				for i := range msgs {
					seq := t*o.txRows + i
					msgs[i] = outbox.Message{
						AggregateType: "bench",
						AggregateID:   fmt.Sprintf("agg-%d", seq%o.aggregates),
						EventType:     "bench.created",
						BusinessKey:   fmt.Sprintf("bk-%d", seq),
						Payload:       payload(seq, o.payload),
					}
				}
				errs[c] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := w.InsertManyTx(ctx, tx, msgs)
					return err
				})
			}
		})
	}
	for t := 0; t < txs && ctx.Err() == nil; t++ {
		next <- t
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
	}
	return ctx.Err()
}

// payload returns a JSON object of about size bytes.
func payload(seq, size int) []byte {
	head := fmt.Sprintf(`{"order_id":"ord-%09d","customer_id":"cus-%06d","amount_cents":%d,"currency":"EUR","status":"created","note":"`,
		seq, seq%100000, 100+seq%99900)
	pad := max(size-len(head)-2, 0)
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}
