package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// A handler failing with a deadlock inside the caller's transaction must
// leave no COMPLETED claim behind: the caller commits what it has, and the
// redelivery must run the handler instead of answering Duplicate.
func TestProcessTxTxRetryErrorUndoesClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		_, err := b.in.ProcessTx(ctx, tx, m, func(ctx context.Context, tx pgx.Tx) (string, error) {
			if _, err := effect(m)(ctx, tx); err != nil {
				return "", err
			}
			return "", deadlock
		})
		if !errors.Is(err, deadlock) {
			t.Errorf("ProcessTx error %v, want the deadlock", err)
		}
		return nil // the caller commits anyway
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := effects(t, b.db, "key-1"); n != 0 {
		t.Fatalf("%d effects after the failed handler, want 0", n)
	}
	res, err := b.in.Process(ctx, b.db.Pool, m, effect(m))
	if err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("redelivery %+v, %v; want Processed", res, err)
	}
	if n := effects(t, b.db, "key-1"); n != 1 {
		t.Fatalf("%d effects after the redelivery, want 1", n)
	}
}

// hangingDelivery starts a two-phase delivery whose handler "crashes": it
// blocks until release is called, and its lease is then expired by the test,
// as if the process had died holding it.
func hangingDelivery(t *testing.T, b *bundle, m inbox.Message, ref string) (release func(), done <-chan delivered) {
	t.Helper()
	ctx := context.Background()
	rel, d := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.in.ProcessExternal(ctx, b.db.Pool, m, h)
	}, func(_ context.Context, held func()) (string, error) {
		held()
		return ref, nil
	})
	if _, err := b.db.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second' WHERE status = 'PROCESSING'`); err != nil {
		t.Fatal(err)
	}
	return rel, d
}

// A handler that crashes the process every time (its lease expires without
// an outcome) is taken over at most MaxAttempts times, then dead-lettered.
func TestExpiredLeaseAtAttemptLimitDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 2, LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)
	release1, done1 := hangingDelivery(t, b, m, "r1") // attempt 1
	release2, done2 := hangingDelivery(t, b, m, "r2") // attempt 2 takes over
	res, err := b.in.ProcessExternal(ctx, b.db.Pool, m, func(context.Context, string) (string, error) {
		t.Error("handler ran a third time with MaxAttempts 2")
		return "", nil
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts || res.Attempts != 2 {
		t.Fatalf("third delivery %+v, %v; want DeadLettered max_attempts after 2 attempts", res, err)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "FAILED_FINAL" || r.Attempts != 2 || r.LastError == nil {
		t.Fatalf("row %+v", r)
	}
	// The transactional path also dead-letters it, without the handler.
	if res, err := b.in.Process(ctx, b.db.Pool, m, func(context.Context, pgx.Tx) (string, error) {
		t.Error("handler ran for a FAILED_FINAL message")
		return "", nil
	}); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatalf("later delivery %+v, %v", res, err)
	}
	release1()
	release2()
	for _, done := range []<-chan delivered{done1, done2} {
		if err := (<-done).err; !errors.Is(err, inbox.ErrLeaseLost) {
			t.Fatalf("crashed worker: %v, want ErrLeaseLost", err)
		}
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "FAILED_FINAL" {
		t.Fatalf("row after the late workers %+v", r)
	}
	if got := metricValue(t, b.reg, "pgoutbox_inbox_dead_lettered_total", "reason", "max_attempts"); got != 1 {
		t.Fatalf("dead-lettered metric %v", got)
	}
}

// Revive resets the attempt count; a worker that lost its lease before the
// revival must still not complete the newer claim that has the same count.
func TestStaleWorkerCannotCompleteRevivedClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 1, LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)
	releaseStale, staleDone := hangingDelivery(t, b, m, "stale") // attempt 1, lease expired
	if res, err := b.in.ProcessExternal(ctx, b.db.Pool, m, func(context.Context, string) (string, error) {
		return "", errors.New("handler ran past MaxAttempts")
	}); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatalf("delivery after the crash %+v, %v", res, err)
	}
	if n, err := b.in.Revive(ctx, b.db.Pool, "m-1"); err != nil || n != 1 {
		t.Fatalf("revive %d, %v", n, err)
	}
	// The revived message is claimed again: attempt 1 once more.
	release, fresh := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.in.ProcessExternal(ctx, b.db.Pool, m, h)
	}, func(_ context.Context, held func()) (string, error) {
		held()
		return "fresh", nil
	})
	releaseStale()
	if err := (<-staleDone).err; !errors.Is(err, inbox.ErrLeaseLost) {
		t.Fatalf("stale worker: %v, want ErrLeaseLost", err)
	}
	release()
	if d := <-fresh; d.err != nil || d.res.Outcome != inbox.Processed || d.res.ResultRef != "fresh" {
		t.Fatalf("revived delivery %+v, %v", d.res, d.err)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "COMPLETED" || *r.ResultRef != "fresh" {
		t.Fatalf("row %+v", r)
	}
}

// Serialization failures that outlast Config.TxRetries count as a failed
// attempt, so MaxAttempts and the dead-letter path apply.
func TestExhaustedTxRetriesRecordAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 2, TxRetries: 1})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	calls := 0
	handler := func(ctx context.Context, tx pgx.Tx) (string, error) {
		calls++
		if _, err := effect(m)(ctx, tx); err != nil {
			return "", err
		}
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$`)
		return "", err
	}
	res, err := b.in.Process(ctx, b.db.Pool, m, handler)
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 1 || calls != 2 {
		t.Fatalf("first delivery %+v, %v after %d calls; want Retry after 2 calls", res, err, calls)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 || r.LastError == nil {
		t.Fatalf("row %+v", r)
	}
	res, err = b.in.Process(ctx, b.db.Pool, m, handler)
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts || res.Attempts != 2 {
		t.Fatalf("second delivery %+v, %v", res, err)
	}
	if effects(t, b.db, "key-1") != 0 {
		t.Fatal("writes of a failed handler survived")
	}
}
