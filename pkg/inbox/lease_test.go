package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A two-phase handler's context ends with its lease; ExtendLease moves the
// lease end in the table; once another delivery took over, the old owner can
// neither extend nor save a request reference.
func TestHandlerContextEndsWithLease(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{LeaseDuration: 200 * time.Millisecond})
	ctx := context.Background()

	res, err := b.In.ProcessExternal(ctx, msg("m-1", "k-1", `{}`), func(ctx context.Context, _ inbox.Message, key string) (string, error) {
		a, ok := inbox.AttemptFromContext(ctx)
		if !ok || a.Number != 1 || !a.PreviousStart.IsZero() || a.PreviousRequestRef != "" {
			t.Errorf("first attempt %+v, %v", a, ok)
		}
		if d, ok := inbox.LeaseDeadline(ctx); !ok || time.Until(d) > 200*time.Millisecond || time.Until(d) < -time.Second {
			t.Errorf("LeaseDeadline %v (%v from now), %v; want within the 200ms lease", d, time.Until(d), ok)
		}
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil || res.Outcome != inbox.Retry || !errors.Is(res.Err, inbox.ErrLeaseExpired) {
		t.Fatalf("handler past its lease: %+v, %v", res, err)
	}

	release, done := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.In.ProcessExternal(ctx, msg("m-1", "k-1", `{}`), h)
	}, func(ctx context.Context, held func()) (string, error) {
		a, _ := inbox.AttemptFromContext(ctx)
		if a.Number != 2 || a.PreviousStart.IsZero() {
			t.Errorf("second attempt %+v", a)
		}
		if err := inbox.ExtendLease(ctx, time.Hour); err != nil {
			t.Errorf("ExtendLease: %v", err)
		}
		if d, _ := inbox.LeaseDeadline(ctx); time.Until(d) < 59*time.Minute {
			t.Errorf("LeaseDeadline after ExtendLease(1h): %v from now", time.Until(d))
		}
		if err := inbox.SaveRequestRef(ctx, "req-2"); err != nil {
			t.Errorf("SaveRequestRef: %v", err)
		}
		held()
		if err := inbox.SaveRequestRef(ctx, "req-late"); !errors.Is(err, inbox.ErrLeaseLost) {
			t.Errorf("SaveRequestRef after a takeover: %v", err)
		}
		if err := inbox.ExtendLease(ctx, time.Hour); !errors.Is(err, inbox.ErrLeaseLost) {
			t.Errorf("ExtendLease after a takeover: %v", err)
		}
		return "late", ctx.Err() // the extended lease keeps ctx alive
	})
	if _, ok := inbox.LeaseDeadline(ctx); ok {
		t.Error("LeaseDeadline outside a two-phase handler reports a lease")
	}
	var extended bool
	if err := b.DB.Pool.QueryRow(ctx, `SELECT locked_until > now() + interval '59 minutes' FROM inbox WHERE message_id = 'm-1'`).Scan(&extended); err != nil || !extended {
		t.Fatalf("lease not extended in the table: %v, %v", extended, err)
	}
	// The lease expires anyway (a frozen worker); another delivery takes over.
	if _, err := b.DB.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	res, err = b.In.ProcessExternal(ctx, msg("m-1", "k-1", `{}`), func(ctx context.Context, _ inbox.Message, key string) (string, error) {
		a, _ := inbox.AttemptFromContext(ctx)
		if a.Number != 3 || a.PreviousRequestRef != "req-2" {
			t.Errorf("takeover attempt %+v", a)
		}
		return "ch-1", inbox.ErrAlreadyDone
	})
	if err != nil || res.Outcome != inbox.Processed || !res.Reconciled || res.ResultRef != "ch-1" {
		t.Fatalf("takeover: %+v, %v", res, err)
	}
	release()
	if err := (<-done).err; !errors.Is(err, inbox.ErrLeaseLost) {
		t.Fatalf("late owner: %v, want ErrLeaseLost", err)
	}
	if err := inbox.SaveRequestRef(ctx, "x"); err == nil {
		t.Fatal("SaveRequestRef outside a handler succeeded")
	}
}

// heldExternal starts a two-phase delivery through deliver whose handler
// runs handler; handler calls held once it holds the lease, which blocks
// until release is called. heldExternal returns once held was called.
func heldExternal(t *testing.T, deliver func(inbox.ExternalHandler) (inbox.Result, error),
	handler func(ctx context.Context, held func()) (string, error)) (release func(), done <-chan delivered) {
	t.Helper()
	inHandler, rel := make(chan struct{}), make(chan struct{})
	ch := make(chan delivered, 1)
	go func() {
		res, err := deliver(func(ctx context.Context, _ inbox.Message, _ string) (string, error) {
			return handler(ctx, func() {
				close(inHandler)
				<-rel
			})
		})
		ch <- delivered{res, err}
	}()
	<-inHandler
	return func() { close(rel) }, ch
}

// delivered is what a delivery in the background returned.
type delivered struct {
	res inbox.Result
	err error
}

// A two-phase delivery holds a lease while its handler runs: a second
// delivery, on either path, answers Busy without running a handler; the
// handler's request reference is recorded.
func TestTwoPhaseLease(t *testing.T) {
	t.Parallel()
	inboxtest.OnBothPaths(t, inbox.Config{LeaseDuration: time.Hour}, twoPhaseLease[pgx.Tx], twoPhaseLease[*sql.Tx])
}

func twoPhaseLease[TTx any](t *testing.T, b *inboxtest.Bundle, p inboxtest.DBPath[TTx]) {
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)

	// The first delivery holds the lease while its handler runs.
	release, first := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return p.ProcessExternal(ctx, m, h)
	}, func(ctx context.Context, held func()) (string, error) {
		if a, ok := inbox.AttemptFromContext(ctx); !ok || a.Number != 1 {
			t.Errorf("attempt %+v, %v", a, ok)
		}
		if err := inbox.SaveRequestRef(ctx, "req-1"); err != nil {
			t.Error(err)
		}
		if err := inbox.ExtendLease(ctx, 2*time.Hour); err != nil {
			t.Error(err)
		}
		held()
		return "charge-1", nil
	})
	res, err := p.ProcessExternal(ctx, m, func(context.Context, inbox.Message, string) (string, error) {
		t.Error("handler ran under a live lease")
		return "", nil
	})
	if err != nil || res.Outcome != inbox.Busy {
		t.Fatalf("live lease: %+v, %v", res, err)
	}
	// The transactional path respects the lease too.
	if res, err := p.Process(ctx, m); err != nil || res.Outcome != inbox.Busy {
		t.Fatalf("live lease, tx path: %+v, %v", res, err)
	}
	release()
	if d := <-first; d.err != nil || d.res.Outcome != inbox.Processed || d.res.ResultRef != "charge-1" || d.res.IdempotencyKey != "pay-1" {
		t.Fatalf("first delivery %+v, %v", d.res, d.err)
	}
	done := func(context.Context, inbox.Message, string) (string, error) {
		t.Error("handler ran for a completed message")
		return "", nil
	}
	if res, err := p.ProcessExternal(ctx, m, done); err != nil || res.Outcome != inbox.Duplicate || res.ResultRef != "charge-1" {
		t.Fatalf("after completion %+v, %v", res, err)
	}
	var ref string
	if err := b.DB.Pool.QueryRow(ctx, `SELECT request_ref FROM inbox WHERE message_id = 'm-1'`).Scan(&ref); err != nil || ref != "req-1" {
		t.Fatalf("request_ref %q, %v", ref, err)
	}
}

func TestTwoPhaseExpiredLeaseTakenOver(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)

	// A worker claims and "crashes" inside its handler: its lease stays.
	release, crashed := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.In.ProcessExternal(ctx, m, h)
	}, func(_ context.Context, held func()) (string, error) {
		held()
		return "", errors.New("crash")
	})
	// Expire the lease.
	if _, err := b.DB.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if err := b.In.RefreshMetrics(ctx); err != nil {
		t.Fatal(err)
	}
	counts, err := store(t, b.DB).Counts(ctx, "billing")
	if err != nil || len(counts) != 1 || counts[0].Status != inbox.StatusProcessing || counts[0].Stuck != 1 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_stuck_processing", "", ""); got != 1 {
		t.Fatalf("stuck gauge %v", got)
	}
	var gotKey string
	res, err := b.In.ProcessExternal(ctx, m, func(ctx context.Context, _ inbox.Message, key string) (string, error) {
		gotKey = key
		return "charge-1", nil
	})
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 2 || gotKey != "pay-1" {
		t.Fatalf("takeover %+v, %v, key %q", res, err, gotKey)
	}
	// The crashed worker comes back: its late failure must not overwrite.
	release()
	if err := (<-crashed).err; !errors.Is(err, inbox.ErrLeaseLost) {
		t.Fatalf("late worker error %v, want ErrLeaseLost", err)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "COMPLETED" || r.Attempts != 2 || *r.ResultRef != "charge-1" {
		t.Fatalf("row %+v", r)
	}
}

// hangingDelivery starts a two-phase delivery whose handler "crashes": it
// blocks until release is called, and its lease is then expired by the test,
// as if the process had died holding it.
func hangingDelivery(t *testing.T, b *inboxtest.Bundle, m inbox.Message, ref string) (release func(), done <-chan delivered) {
	t.Helper()
	ctx := context.Background()
	rel, d := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.In.ProcessExternal(ctx, m, h)
	}, func(_ context.Context, held func()) (string, error) {
		held()
		return ref, nil
	})
	if _, err := b.DB.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second' WHERE status = 'PROCESSING'`); err != nil {
		t.Fatal(err)
	}
	return rel, d
}

// A handler that crashes the process every time (its lease expires without
// an outcome) is taken over at most MaxAttempts times, then dead-lettered.
func TestExpiredLeaseAtAttemptLimitDeadLetters(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 2, LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)
	release1, done1 := hangingDelivery(t, b, m, "r1") // attempt 1
	release2, done2 := hangingDelivery(t, b, m, "r2") // attempt 2 takes over
	res, err := b.In.ProcessExternal(ctx, m, func(context.Context, inbox.Message, string) (string, error) {
		t.Error("handler ran a third time with MaxAttempts 2")
		return "", nil
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts || res.Attempts != 2 {
		t.Fatalf("third delivery %+v, %v; want DeadLettered max-attempts after 2 attempts", res, err)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_FINAL" || r.Attempts != 2 || r.LastError == nil {
		t.Fatalf("row %+v", r)
	}
	// The transactional path also dead-letters it, without the handler.
	if res, err := b.In.Process(ctx, m, func(context.Context, pgx.Tx, inbox.Message) (string, error) {
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
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_FINAL" {
		t.Fatalf("row after the late workers %+v", r)
	}
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", "max-attempts"); got != 1 {
		t.Fatalf("dead-lettered metric %v", got)
	}
}

// Revive resets the attempt count; a worker that lost its lease before the
// revival must still not complete the newer claim that has the same count.
func TestStaleWorkerCannotCompleteRevivedClaim(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 1, LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)
	releaseStale, staleDone := hangingDelivery(t, b, m, "stale") // attempt 1, lease expired
	if res, err := b.In.ProcessExternal(ctx, m, func(context.Context, inbox.Message, string) (string, error) {
		return "", errors.New("handler ran past MaxAttempts")
	}); err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatalf("delivery after the crash %+v, %v", res, err)
	}
	if n, err := store(t, b.DB).Revive(ctx, inbox.ReviveParams{Consumer: "billing", MessageIDs: []string{"m-1"}}); err != nil || n != 1 {
		t.Fatalf("revive %d, %v", n, err)
	}
	// The revived message is claimed again: attempt 1 once more.
	release, fresh := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.In.ProcessExternal(ctx, m, h)
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
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "COMPLETED" || *r.ResultRef != "fresh" {
		t.Fatalf("row %+v", r)
	}
}
