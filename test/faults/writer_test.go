package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// aggregateTypes route the rows to two topics (outbox.{aggregate_type}).
var aggregateTypes = []string{"order", "payment"}

// row is one outbox row a writer tried to commit.
type row struct {
	id   uuid.UUID
	tx   txID // the DB transaction it was written in
	key  string
	rank int // position among its key's rows in the writer's program order
}

// txID names one DB transaction: its writer and sequence number.
type txID struct{ writer, seq int }

// ledger holds every row the writers tried to commit. What committed is
// read from the outbox table at the end (a commit cut by a Postgres
// restart has an unknown outcome until then).
type ledger struct {
	mu    sync.Mutex
	rows  map[uuid.UUID]*row
	byKey map[string][]uuid.UUID // program order = commit order: each key belongs to one writer
	acked atomic.Int64           // rows whose commit returned without error
}

func newLedger() *ledger {
	return &ledger{rows: make(map[uuid.UUID]*row), byKey: make(map[string][]uuid.UUID)}
}

func (l *ledger) add(tx txID, msgs []outbox.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.rows[m.ID] = &row{id: m.ID, tx: tx, key: m.AggregateID, rank: len(l.byKey[m.AggregateID])}
		l.byKey[m.AggregateID] = append(l.byKey[m.AggregateID], m.ID)
	}
}

// startWriters runs n writers until the returned stop is called.
func startWriters(pool *pgxpool.Pool, l *ledger, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { writer(ctx, pool, w, l) })
	}
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}

// writer commits multi-row transactions into the outbox until ctx ends:
// one in ten rolled back, one in five with rows in a savepoint that is
// rolled back, the others committed. Its keys ("w<n>-<k>") are its own, so
// their commit order is its program order. Errors (a Postgres restart)
// are retried with a fresh transaction.
func writer(ctx context.Context, pool *pgxpool.Pool, n int, l *ledger) {
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano())))
	batch := func(seq, size int, part string) []outbox.Message {
		msgs := make([]outbox.Message, size)
		for i := range msgs {
			k := rng.IntN(16)
			msgs[i] = outbox.Message{
				ID:            uuid.Must(uuid.NewV7()), // as the writer makes them: recovery orders a transaction's rows by ID
				AggregateType: aggregateTypes[k%len(aggregateTypes)],
				AggregateID:   fmt.Sprintf("w%d-%d", n, k),
				EventType:     "fault.test",
				BusinessKey:   fmt.Sprintf("w%d-%d-%s%d", n, seq, part, i),
				Payload:       fmt.Appendf(nil, `{"writer":%d,"seq":%d,"part":%q,"i":%d}`, n, seq, part, i),
			}
		}
		return msgs
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		size := 1 + rng.IntN(6)
		if rng.IntN(10) == 0 {
			size = 20 + rng.IntN(60)
		}
		wctx := context.WithoutCancel(ctx) // a commit cut by ctx would have no known outcome
		tx, err := pool.Begin(wctx)
		if err != nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		first := batch(seq, size, "a")
		l.add(txID{n, seq}, first)
		err = insert(wctx, w, tx, first)
		if err == nil && rng.IntN(5) == 0 {
			err = savepointRolledBack(wctx, w, tx, batch(seq, 1+rng.IntN(4), "sp"), l, txID{n, seq})
			if err == nil {
				after := batch(seq, 1+rng.IntN(3), "b")
				l.add(txID{n, seq}, after)
				err = insert(wctx, w, tx, after)
			}
		}
		if err != nil || rng.IntN(10) == 0 {
			_ = tx.Rollback(wctx)
			if err != nil {
				pause(ctx, 50*time.Millisecond)
			}
			continue
		}
		if err := tx.Commit(wctx); err != nil {
			pause(ctx, 50*time.Millisecond)
			continue
		}
		l.acked.Add(int64(size))
		pause(ctx, time.Duration(5+rng.IntN(10))*time.Millisecond) // pacing (a modest volume on a shared machine), not synchronisation
	}
}

func insert(ctx context.Context, w *outbox.Writer[pgx.Tx], tx pgx.Tx, msgs []outbox.Message) error {
	_, err := w.InsertManyTx(ctx, tx, msgs)
	return err
}

// savepointRolledBack writes msgs in a savepoint of tx and rolls the
// savepoint back: the rows never commit, though tx does.
func savepointRolledBack(ctx context.Context, w *outbox.Writer[pgx.Tx], tx pgx.Tx, msgs []outbox.Message, l *ledger, id txID) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	l.add(id, msgs)
	if err := insert(ctx, w, sp, msgs); err != nil {
		return err
	}
	return sp.Rollback(ctx)
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
