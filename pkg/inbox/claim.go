package inbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgoutbox/pgoutbox/internal/dbdriver"
)

// claim is the result of claiming a message inside a transaction.
type claim struct {
	// rowID is the message ID of the row that carries the message: the
	// message's own, or that of an earlier message with the same business
	// key and payload.
	rowID string
	// from is the row's status before the claim ("" for a new row).
	from Status
	// attempt is the attempt this delivery runs.
	attempt int
	// lease is the end of the lease this delivery holds (two-phase path):
	// the fencing token of the completion.
	lease time.Time
	// done is set when the handler must not run.
	done *Result
	// completed says that the claim wrote the row COMPLETED already (a
	// marked row completed in place); only a result reference is left.
	completed bool
	// prevStart and prevRef are what the previous two-phase attempt left:
	// when it claimed the message and the request reference it saved.
	prevStart time.Time
	prevRef   string
}

type storedRow struct {
	messageID, businessKey string
	hash                   []byte
	status                 Status
	attempts               int
	resultRef              string
	leased                 bool
	deadLettered           bool
	startedAt              *time.Time
	requestRef             string
}

// claimTx claims msg as the first statement of tx. lease > 0 sets
// locked_until (two-phase path). marked says that markAttempt counted this
// attempt in a RECEIVED row of msg's ID, business key and payload: on the
// transactional path the first statement then completes that row in place
// (see queries.completeMarked), and only when it finds the row changed does
// the claim go the usual way.
func (in *core) claimTx(ctx context.Context, tx dbdriver.Tx, msg *Message, hash []byte, lease time.Duration, marked bool) (claim, error) {
	q := &in.queries
	for try := range 3 {
		if marked && lease == 0 && try == 0 {
			var attempts int
			err := tx.QueryRow(ctx, q.completeMarked, in.cfg.Consumer, msg.ID, msg.BusinessKey, hash).Scan(&attempts)
			if err == nil {
				return claim{rowID: msg.ID, from: StatusReceived, attempt: attempts, completed: true}, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return claim{}, fmt.Errorf("inbox: claim %s: %w", msg.ID, err)
			}
		}
		var (
			attempts int
			until    *time.Time
		)
		err := tx.QueryRow(ctx, q.claim, in.cfg.Consumer, msg.ID, msg.BusinessKey, hash, lease.Microseconds(),
			msg.Topic, msg.Partition, msg.Offset).Scan(&attempts, &until)
		if err == nil {
			return claim{rowID: msg.ID, attempt: attempts, lease: deref(until)}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return claim{}, fmt.Errorf("inbox: claim %s: %w", msg.ID, err)
		}
		rows, err := tx.Query(ctx, q.lookup, in.cfg.Consumer, msg.ID, msg.BusinessKey)
		found, err := dbdriver.Collect(rows, err, func(r dbdriver.Rows) (storedRow, error) {
			var s storedRow
			err := r.Scan(&s.messageID, &s.businessKey, &s.hash, &s.status, &s.attempts, &s.resultRef, &s.leased, &s.deadLettered, &s.startedAt, &s.requestRef)
			return s, err
		})
		if err != nil {
			return claim{}, fmt.Errorf("inbox: look up %s: %w", msg.ID, err)
		}
		if len(found) == 0 {
			continue // purged between the two statements; claim again
		}
		row := found[0]
		for _, r := range found {
			if r.messageID == msg.ID {
				row = r
			}
		}
		return in.decide(ctx, tx, msg, hash, lease, marked, row)
	}
	return claim{}, fmt.Errorf("inbox: claim %s: row vanished repeatedly", msg.ID)
}

// decide settles a delivery that met an existing row.
func (in *core) decide(ctx context.Context, tx dbdriver.Tx, msg *Message, hash []byte, lease time.Duration, marked bool, row storedRow) (claim, error) {
	c := claim{rowID: row.messageID, from: row.status, attempt: row.attempts, prevStart: deref(row.startedAt), prevRef: row.requestRef}
	done := func(o Outcome) (claim, error) {
		c.done = &Result{Outcome: o, Status: row.status, Attempts: row.attempts, ResultRef: row.resultRef, from: row.status}
		return c, nil
	}
	var reason string
	switch {
	case row.messageID == msg.ID && row.businessKey != msg.BusinessKey:
		reason = "message-id reused with another business key"
	case !bytes.Equal(row.hash, hash):
		reason = "payload differs"
	}
	if reason != "" {
		cerr := &ConflictError{MessageID: msg.ID, BusinessKey: msg.BusinessKey, PayloadHash: hash,
			StoredMessageID: row.messageID, StoredBusinessKey: row.businessKey, StoredPayloadHash: row.hash, Reason: reason}
		c.done = &Result{Outcome: Conflict, Status: row.status, Attempts: row.attempts, Reason: reason, Err: cerr}
		if in.cfg.ConflictPolicy == ConflictPolicyDeadLetter {
			c.done.Outcome, c.done.Reason = DeadLettered, ReasonConflict
		}
		return c, nil
	}
	switch row.status {
	case StatusCompleted:
		return done(Duplicate)
	case StatusFailedFinal:
		c, err := done(DeadLettered)
		c.done.Reason, c.done.deadLetterSent = ReasonFailedFinal, row.deadLettered
		return c, err
	case StatusProcessing:
		if row.leased {
			return done(Busy)
		}
	}
	// RECEIVED, FAILED_RETRYABLE, or PROCESSING with an expired lease; the
	// row lock (FOR UPDATE) is ours until the transaction ends. A RECEIVED
	// row is an attempt that started and never ended (the process died),
	// unless this delivery's own marker counted it just now.
	counted := marked && row.status == StatusReceived && row.messageID == msg.ID
	if !counted && row.attempts >= in.cfg.MaxAttempts {
		return in.exhaust(ctx, tx, c, row)
	}
	var until *time.Time
	err := tx.QueryRow(ctx, in.queries.takeover, in.cfg.Consumer, row.messageID, lease.Microseconds(),
		msg.Topic, msg.Partition, msg.Offset, counted).Scan(&c.attempt, &until)
	if err != nil {
		return claim{}, fmt.Errorf("inbox: take over %s: %w", row.messageID, err)
	}
	c.lease = deref(until)
	return c, nil
}

// exhaust makes a row that is out of attempts FAILED_FINAL instead of taking
// it over: a PROCESSING row whose lease expired MaxAttempts times (the
// handler crashed or hung every time), or a FAILED_RETRYABLE one after
// MaxAttempts was lowered. The delivery is DeadLettered.
func (in *core) exhaust(ctx context.Context, tx dbdriver.Tx, c claim, row storedRow) (claim, error) {
	why := fmt.Sprintf("attempt %d of %d ended without an outcome (lease expired)", row.attempts, in.cfg.MaxAttempts)
	var lastErr string
	if err := tx.QueryRow(ctx, in.queries.exhaust, in.cfg.Consumer, row.messageID, why).Scan(&lastErr); err != nil {
		return claim{}, fmt.Errorf("inbox: dead-letter %s: %w", row.messageID, err)
	}
	c.done = &Result{Outcome: DeadLettered, Status: StatusFailedFinal, Attempts: row.attempts,
		Reason: ReasonMaxAttempts, Err: errors.New(lastErr), from: row.status}
	return c, nil
}

// markAttempt counts the coming attempt of msg in a statement of its own,
// committed before the attempt starts (see queries.markAttempt). It reports
// whether it did; final is set when the message has used up its attempts: it
// is FAILED_FINAL now.
func (in *core) markAttempt(ctx context.Context, msg *Message, hash []byte) (marked bool, final *Result, err error) {
	var (
		status   Status
		attempts int
		lastErr  string
	)
	err = dbdriver.RunStatement(ctx, in.db, func(q dbdriver.Querier) error {
		return q.QueryRow(ctx, in.queries.markAttempt, in.cfg.Consumer, msg.ID, msg.BusinessKey, hash,
			in.cfg.MaxAttempts, msg.Topic, msg.Partition, msg.Offset).Scan(&status, &attempts, &lastErr)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("inbox: mark attempt of %s: %w", msg.ID, err)
	case status == StatusFailedFinal:
		return false, &Result{Outcome: DeadLettered, Status: status, Attempts: attempts, Reason: ReasonMaxAttempts,
			Err: errors.New(lastErr), from: StatusReceived}, nil
	}
	return true, nil, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
