package inbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// errNoLease is returned by SaveRequestRef and ExtendLease outside a
// two-phase handler.
var errNoLease = errors.New("inbox: not called from a two-phase handler's context")

// Attempt describes the two-phase attempt a handler runs, so that it can
// tell a first attempt from a takeover and reconcile with an external system
// that has no idempotency keys: ask it first what the previous attempt did.
type Attempt struct {
	// Number counts from 1.
	Number int
	// PreviousStart is when the previous attempt claimed the message (zero
	// on the first attempt).
	PreviousStart time.Time
	// PreviousRequestRef is the reference the previous attempts saved last
	// with SaveRequestRef ("" when none).
	PreviousRequestRef string
}

// AttemptFromContext returns the attempt of the two-phase handler whose
// context ctx is (ProcessExternal, inboxkafka.Config.ExternalHandler).
func AttemptFromContext(ctx context.Context) (Attempt, bool) {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return Attempt{}, false
	}
	return l.attempt, true
}

// SaveRequestRef records ref (say, the request ID the handler is about to
// send to a provider) on the message's row in its own short statement,
// before the handler calls out, so that a later attempt finds it in
// Attempt.PreviousRequestRef even when this one crashes. It is fenced by the
// lease: once another delivery took the message over it writes nothing and
// returns an error wrapping ErrLeaseLost; the handler must not call out then.
func SaveRequestRef(ctx context.Context, ref string) error {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return errNoLease
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := dbdriver.ExecOne(context.WithoutCancel(ctx), l.in.db, l.in.queries.saveRequestRef, l.in.cfg.Consumer, l.rowID,
		ref, l.attempt.Number, l.until)
	if err != nil {
		return fmt.Errorf("inbox: save request reference: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: request reference not saved", ErrLeaseLost)
	}
	return nil
}

// ExtendLease moves the end of the handler's lease to d from now, for
// external calls that outlast Config.LeaseDuration; the handler's context
// then ends at the new lease end instead. It returns an error wrapping
// ErrLeaseLost when another delivery took the message over meanwhile.
func ExtendLease(ctx context.Context, d time.Duration) error {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return errNoLease
	}
	if d <= 0 {
		return fmt.Errorf("inbox: ExtendLease by %v: want a positive duration", d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var until time.Time
	wctx := context.WithoutCancel(ctx)
	err := dbdriver.RunStatement(wctx, l.in.db, func(q dbdriver.Querier) error {
		return q.QueryRow(wctx, l.in.queries.extendLease, l.in.cfg.Consumer, l.rowID,
			d.Microseconds(), l.attempt.Number, l.until).Scan(&until)
	})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: lease not extended", ErrLeaseLost)
		}
		return fmt.Errorf("inbox: extend lease: %w", err)
	}
	l.until = until
	l.localEnd = time.Now().Add(d)
	l.timer.Reset(d)
	return nil
}

// LeaseDeadline returns when the two-phase handler's lease ends by this
// process's clock (its context ends then, cause ErrLeaseExpired), moved by
// ExtendLease. A handler bounds an external request by it: pass it to the
// provider as the request's deadline, so that a request still in flight
// when another delivery takes over can no longer land. ok is false outside
// a two-phase handler. (The handler's ctx.Deadline reports none: a context's
// deadline cannot move.)
func LeaseDeadline(ctx context.Context) (deadline time.Time, ok bool) {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.localEnd, true
}

type leaseKey struct{}

// lease is the state of one two-phase claim while its handler runs.
type lease struct {
	in      *core
	rowID   string
	attempt Attempt
	timer   *time.Timer

	mu       sync.Mutex
	until    time.Time // the fencing token; ExtendLease moves it
	localEnd time.Time // when timer fires, by this process's clock
}

// withLease returns the handler's context: it carries the lease and ends
// with it (cause ErrLeaseExpired). stop releases the timer.
func (in *core) withLease(ctx context.Context, c claim) (hctx context.Context, l *lease, stop func()) {
	hctx, cancel := context.WithCancelCause(ctx)
	l = &lease{in: in, rowID: c.rowID, until: c.lease,
		attempt: Attempt{Number: c.attempt, PreviousStart: c.prevStart, PreviousRequestRef: c.prevRef}}
	// Measured from now, after the claim committed: the lease in the
	// database ends a little later, so the handler stops first.
	l.localEnd = time.Now().Add(in.cfg.LeaseDuration)
	l.timer = time.AfterFunc(in.cfg.LeaseDuration, func() { cancel(ErrLeaseExpired) })
	hctx = context.WithValue(hctx, leaseKey{}, l)
	return hctx, l, func() {
		l.timer.Stop()
		cancel(nil)
	}
}

// token returns the current fencing token.
func (l *lease) token() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}
