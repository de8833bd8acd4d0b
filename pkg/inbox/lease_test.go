package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// A two-phase handler's context ends with its lease; ExtendLease moves the
// lease end in the table; once another delivery took over, the old owner can
// neither extend nor save a request reference.
func TestHandlerContextEndsWithLease(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{LeaseDuration: 200 * time.Millisecond})
	ctx := context.Background()

	res, err := b.in.ProcessExternal(ctx, b.db.Pool, msg("m-1", "k-1", `{}`), func(ctx context.Context, key string) (string, error) {
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
		return b.in.ProcessExternal(ctx, b.db.Pool, msg("m-1", "k-1", `{}`), h)
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
	if err := b.db.Pool.QueryRow(ctx, `SELECT locked_until > now() + interval '59 minutes' FROM inbox WHERE message_id = 'm-1'`).Scan(&extended); err != nil || !extended {
		t.Fatalf("lease not extended in the table: %v, %v", extended, err)
	}
	// The lease expires anyway (a frozen worker); another delivery takes over.
	if _, err := b.db.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	res, err = b.in.ProcessExternal(ctx, b.db.Pool, msg("m-1", "k-1", `{}`), func(ctx context.Context, key string) (string, error) {
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
