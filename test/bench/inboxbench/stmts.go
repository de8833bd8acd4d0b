package main

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// statements is a pgx tracer that counts the statements a pool sends and
// the round trips they take: a query is one of each, a batch (BEGIN with
// the inbox's claim) one round trip of several statements. A transaction's
// BEGIN and COMMIT are statements of their own.
type statements struct {
	n, trips atomic.Int64
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	s.trips.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.n.Add(int64(d.Batch.Len()))
	s.trips.Add(1)
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// read returns the statements and round trips counted so far.
func (s *statements) read() (n, trips int64) { return s.n.Load(), s.trips.Load() }
