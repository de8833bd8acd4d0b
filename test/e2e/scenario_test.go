package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// startWriters runs two writers (see writer) into l until the returned stop
// is called; stop waits for them and fails t when one failed.
func startWriters(t *testing.T, pool *pgxpool.Pool, l *ledger) (stop func()) {
	t.Helper()
	return startWritersFrom(t, pool, 0, l)
}

// startWritersFrom is startWriters with writers numbered first and
// first+1, so that their aggregates differ from those of the writers of
// another database.
func startWritersFrom(t *testing.T, pool *pgxpool.Pool, first int, l *ledger) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for n := range errs {
		wg.Go(func() { errs[n] = writer(ctx, pool, first+n, l) })
	}
	stopped := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stopped)
	return func() {
		t.Helper()
		stopped()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
		}
	}
}

// slotActive reports whether a walsender streams slot.
func slotActive(ctx context.Context, pool *pgxpool.Pool, slot string) (active bool, err error) {
	err = pool.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
	return active, err
}

// killRepeatedly starts the relay binary with args kills times and SIGKILLs
// it at a random moment after it began streaming slot, waiting each time for
// the walsender to release the slot. With commits set, the kill comes
// instead at the first value commits sends after the random moment (see
// progressWrites).
func killRepeatedly(t *testing.T, bin, logPath string, args []string, pool *pgxpool.Pool, slot string, kills int, l *ledger, commits <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := 0; i < kills; i++ {
		p := startRelay(t, bin, logPath, args...)
		testenv.WaitFor(t, time.Minute, "relay streaming the slot", func() (bool, error) {
			if p.exited() {
				return false, fmt.Errorf("relay exited on its own: %v", p.err)
			}
			return slotActive(ctx, pool, slot)
		})
		delay := time.Duration(100+rng.IntN(1400)) * time.Millisecond
		select { // a random moment while streaming, not a synchronisation
		case <-time.After(delay):
		case <-p.done:
			t.Fatalf("relay exited on its own: %v", p.err)
		}
		at := "after " + delay.String()
		if commits != nil {
			drain(commits)
			select {
			case <-commits:
				at += ", at a progress write"
			case <-p.done:
				t.Fatalf("relay exited on its own: %v", p.err)
			case <-time.After(time.Minute):
				t.Fatal("no commit of the relay within a minute")
			}
		}
		p.kill()
		testenv.WaitFor(t, time.Minute, "walsender releasing the slot", func() (bool, error) {
			active, err := slotActive(ctx, pool, slot)
			return !active, err
		})
		l.mu.Lock()
		t.Logf("kill %d %s: %d messages committed so far", i+1, at, l.count)
		l.mu.Unlock()
	}
}

// drain empties c of what it holds.
func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// writeFence commits one more outbox row (recorded in l), after every
// writer transaction ended, and returns the WAL position after its commit:
// a slot confirmed there has published the row. A position read before
// the row is not enough: a relay with nothing in flight confirms the WAL
// end of the server's keepalives, which passes that position once the
// server has read WAL past it (the row's insert, or another database's
// WAL: a fleet test's sources share one server) before it decodes the
// row's commit. The next fence, in another source, was then published
// before this one.
func writeFence(t *testing.T, pool *pgxpool.Pool, l *ledger) string {
	t.Helper()
	ctx := context.Background()
	fence := []outbox.Message{{AggregateType: crashAggregateTypes[0], AggregateID: "fence", EventType: "e2e.fence", BusinessKey: "fence", Payload: []byte(`{}`)}}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		w, _ := outbox.NewWriter(outbox.Pgx(nil), nil)
		id, err := w.InsertTx(ctx, tx, fence[0])
		if err == nil {
			defer l.commit(fence, []uuid.UUID{id})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var endLSN string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&endLSN); err != nil {
		t.Fatal(err)
	}
	return endLSN
}

// waitConfirmed waits until slot's confirmed position reaches endLSN,
// failing early when one of the relays exits.
func waitConfirmed(t *testing.T, pool *pgxpool.Pool, slot, endLSN string, relays ...*relayProc) {
	t.Helper()
	testenv.WaitFor(t, 3*time.Minute, "slot "+slot+" confirmed past the last commit", func() (bool, error) {
		for _, p := range relays {
			if p.exited() {
				return false, fmt.Errorf("relay exited on its own: %v", p.err)
			}
		}
		var done bool
		err := pool.QueryRow(context.Background(), `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
			slot, endLSN).Scan(&done)
		return done, err
	})
}
