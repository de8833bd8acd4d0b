package inbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

func TestMain(m *testing.M) {
	testenv.MainWithDatabase(m) // DATABASE_URL for the examples
}

// store is the admin API of the default table of db.
func store(t *testing.T, db *testenv.DB) *inbox.Store {
	t.Helper()
	s, err := inbox.NewStore(inbox.Pgx(db.Pool), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func msg(id, key, payload string) inbox.Message {
	return inbox.Message{ID: id, BusinessKey: key, Payload: []byte(payload)}
}

// deliverConcurrently runs deliver from workers goroutines at once and
// counts the outcomes.
func deliverConcurrently(t *testing.T, workers int, deliver func(i int) (inbox.Result, error)) map[inbox.Outcome]int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		results = map[inbox.Outcome]int{}
	)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := deliver(i)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			results[res.Outcome]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// Concurrent deliveries of one message, and of another message ID with the
// same business key and payload, run the handler once; the rest are
// duplicates.
func TestConcurrentDeliveriesProcessOnce(t *testing.T) {
	t.Parallel()
	inboxtest.OnBothPaths(t, inbox.Config{}, concurrentDeliveriesProcessOnce[pgx.Tx], concurrentDeliveriesProcessOnce[*sql.Tx])
}

func concurrentDeliveriesProcessOnce[TTx any](t *testing.T, b *inboxtest.Bundle, p inboxtest.DBPath[TTx]) {
	ctx := context.Background()
	const workers = 24
	m := msg("m-1", "pay-1", `{"amount":1}`)
	m2 := msg("m-2", "pay-1", `{"amount":1}`)
	results := deliverConcurrently(t, workers, func(i int) (inbox.Result, error) {
		if i%2 == 1 {
			return p.Process(ctx, m2)
		}
		return p.Process(ctx, m)
	})
	if results[inbox.Processed] != 1 || results[inbox.Duplicate] != workers-1 {
		t.Fatalf("outcomes %v, want 1 processed and %d duplicates", results, workers-1)
	}
	if n := inboxtest.Effects(t, b.DB, "pay-1"); n != 1 {
		t.Fatalf("side effect happened %d times, want 1", n)
	}
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_messages_total", "outcome", "duplicate"); got != workers-1 {
		t.Fatalf("duplicate metric %v", got)
	}
}

func TestOutcomeMatrix(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyDeadLetter, MaxAttempts: 1})
	ctx := context.Background()
	first := msg("m-1", "key-1", `{"v":1}`)
	if res, err := b.In.Process(ctx, first, inboxtest.Effect(first)); err != nil || res.Outcome != inbox.Processed || res.ResultRef != "ref-key-1" {
		t.Fatalf("first delivery: %+v, %v", res, err)
	}
	// A message that will be dead-lettered.
	bad := msg("m-bad", "key-bad", `{}`)
	failing := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", errors.New("boom") }
	if res, err := b.In.Process(ctx, bad, failing); err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts {
		t.Fatalf("failing delivery: %+v, %v", res, err)
	}

	cases := []struct {
		name    string
		msg     inbox.Message
		outcome inbox.Outcome
		reason  string
	}{
		{"same ID same key", msg("m-1", "key-1", `{"v":1}`), inbox.Duplicate, ""},
		{"new ID same key same payload", msg("m-2", "key-1", `{"v":1}`), inbox.Duplicate, ""},
		{"same ID other key", msg("m-1", "key-other", `{"v":1}`), inbox.DeadLettered, inbox.ReasonConflict},
		{"same key other payload", msg("m-3", "key-1", `{"v":2}`), inbox.DeadLettered, inbox.ReasonConflict},
		{"same ID other payload", msg("m-1", "key-1", `{"v":2}`), inbox.DeadLettered, inbox.ReasonConflict},
		{"dead-lettered message redelivered", msg("m-bad", "key-bad", `{}`), inbox.DeadLettered, inbox.ReasonFailedFinal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			res, err := b.In.Process(ctx, tc.msg, func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
				ran = true
				return "", nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome || res.Reason != tc.reason || ran {
				t.Fatalf("outcome %v reason %q handler ran %v; want %v %q and no handler", res.Outcome, res.Reason, ran, tc.outcome, tc.reason)
			}
			if tc.outcome == inbox.Duplicate && res.ResultRef != "ref-key-1" {
				t.Fatalf("duplicate result ref %q", res.ResultRef)
			}
			if tc.reason == inbox.ReasonConflict && !errors.Is(res.Err, inbox.ErrConflict) {
				t.Fatalf("conflict error %v", res.Err)
			}
		})
	}
	if n := inboxtest.Effects(t, b.DB, "key-1"); n != 1 {
		t.Fatalf("side effect happened %d times", n)
	}
}

func TestConflictPolicyStopReturnsConflict(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyStop})
	ctx := context.Background()
	m := msg("m-1", "key-1", `1`)
	if _, err := b.In.Process(ctx, m, inboxtest.Effect(m)); err != nil {
		t.Fatal(err)
	}
	res, err := b.In.Process(ctx, msg("m-1", "key-2", `1`), inboxtest.Effect(m))
	var cerr *inbox.ConflictError
	if !errors.Is(err, inbox.ErrConflict) || !errors.As(err, &cerr) || res.Outcome != inbox.Conflict {
		t.Fatalf("got %+v, %v; want Conflict and ErrConflict", res, err)
	}
	if cerr.StoredBusinessKey != "key-1" || cerr.BusinessKey != "key-2" {
		t.Fatalf("conflict %+v", cerr)
	}
}

func TestHandlerErrorRollsBackAndRecordsAttempts(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 3})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	failing := func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
		if _, err := inboxtest.Effect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		return "", fmt.Errorf("gateway down")
	}
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := b.In.Process(ctx, m, failing)
		if err != nil {
			t.Fatal(err)
		}
		r := inboxtest.ReadRow(t, b.DB, "billing", "m-1")
		if inboxtest.Effects(t, b.DB, "key-1") != 0 {
			t.Fatal("business write of a failed handler survived")
		}
		if r.Attempts != attempt || r.LastError == nil || *r.LastError != "gateway down" {
			t.Fatalf("attempt %d: row %+v", attempt, r)
		}
		want, status := inbox.Retry, "FAILED_RETRYABLE"
		if attempt == 3 {
			want, status = inbox.DeadLettered, "FAILED_FINAL"
		}
		if res.Outcome != want || r.Status != status || res.Attempts != attempt {
			t.Fatalf("attempt %d: result %+v row %+v", attempt, res, r)
		}
	}
	// Later deliveries do not run the handler.
	res, err := b.In.Process(ctx, m, func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		t.Fatal("handler ran for a FAILED_FINAL message")
		return "", nil
	})
	if err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatalf("redelivery %+v, %v", res, err)
	}
	// Revive makes it processable again.
	if n, err := store(t, b.DB).Revive(ctx, inbox.ReviveParams{Consumer: "billing", MessageIDs: []string{"m-1"}}); err != nil || n != 1 {
		t.Fatalf("revive %d, %v", n, err)
	}
	res, err = b.In.Process(ctx, m, inboxtest.Effect(m))
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 1 {
		t.Fatalf("after revive %+v, %v", res, err)
	}
	if inboxtest.Effects(t, b.DB, "key-1") != 1 {
		t.Fatal("revived message did not run once")
	}
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_retries_total", "", ""); got != 2 {
		t.Fatalf("retries metric %v, want 2", got)
	}
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", "max-attempts"); got != 1 {
		t.Fatalf("dead-lettered metric %v, want 1", got)
	}
	// The redelivery of the FAILED_FINAL message (failed-final) is not a
	// second dead-lettered message (docs/operations.md).
	if got := metricValue(t, b.Reg, "pgoutbox_inbox_dead_lettered_total", "", ""); got != 1 {
		t.Fatalf("dead-lettered metric over every reason %v, want 1", got)
	}
}

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 10})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	res, err := b.In.Process(ctx, m, func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("invalid amount"))
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent || res.Attempts != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_FINAL" {
		t.Fatalf("row %+v", r)
	}
}

func TestSerializationFailureRetried(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	calls := 0
	res, err := b.In.Process(ctx, m, func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
		calls++
		if calls < 3 {
			_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$`)
			return "", err
		}
		return inboxtest.Effect(m)(ctx, tx, m)
	})
	if err != nil || res.Outcome != inbox.Processed || calls != 3 {
		t.Fatalf("got %+v, %v after %d calls", res, err, calls)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Attempts != 1 || r.Status != "COMPLETED" {
		t.Fatalf("row %+v", r)
	}
}

// Serialization failures that outlast Config.TxRetries count as a failed
// attempt, so MaxAttempts and the dead-letter path apply.
func TestExhaustedTxRetriesRecordAttempt(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 2, TxRetries: 1})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	calls := 0
	handler := func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
		calls++
		if _, err := inboxtest.Effect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$`)
		return "", err
	}
	res, err := b.In.Process(ctx, m, handler)
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 1 || calls != 2 {
		t.Fatalf("first delivery %+v, %v after %d calls; want Retry after 2 calls", res, err, calls)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 || r.LastError == nil {
		t.Fatalf("row %+v", r)
	}
	res, err = b.In.Process(ctx, m, handler)
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts || res.Attempts != 2 {
		t.Fatalf("second delivery %+v, %v", res, err)
	}
	if inboxtest.Effects(t, b.DB, "key-1") != 0 {
		t.Fatal("writes of a failed handler survived")
	}
}

func TestProcessTxInCallerTransaction(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 2})
	ctx := context.Background()
	ok := msg("m-1", "key-1", `{}`)
	bad := msg("m-2", "key-2", `{}`)
	err := pgx.BeginFunc(ctx, b.DB.Pool, func(tx pgx.Tx) error {
		res, err := b.In.ProcessTx(ctx, tx, ok, inboxtest.Effect(ok))
		if err != nil || res.Outcome != inbox.Processed {
			return fmt.Errorf("ok: %+v, %w", res, err)
		}
		res, err = b.In.ProcessTx(ctx, tx, bad, func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
			if _, err := inboxtest.Effect(bad)(ctx, tx, bad); err != nil {
				return "", err
			}
			return "", errors.New("nope")
		})
		if err != nil || res.Outcome != inbox.Retry {
			return fmt.Errorf("bad: %+v, %w", res, err)
		}
		res, err = b.In.ProcessTx(ctx, tx, ok, inboxtest.Effect(ok))
		if err != nil || res.Outcome != inbox.Duplicate {
			return fmt.Errorf("dup: %+v, %w", res, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inboxtest.Effects(t, b.DB, "key-1") != 1 || inboxtest.Effects(t, b.DB, "key-2") != 0 {
		t.Fatal("effects not as committed")
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-2"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
	// A rolled-back caller transaction leaves nothing behind.
	tx, err := b.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m3 := msg("m-3", "key-3", `{}`)
	if res, err := b.In.ProcessTx(ctx, tx, m3, inboxtest.Effect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	_ = tx.Rollback(ctx)
	if res, err := b.In.Process(ctx, m3, inboxtest.Effect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
}

// A handler failing with a deadlock inside the caller's transaction must
// leave no COMPLETED claim behind: the caller commits what it has, and the
// redelivery must run the handler instead of answering Duplicate.
func TestProcessTxTxRetryErrorUndoesClaim(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	err := pgx.BeginFunc(ctx, b.DB.Pool, func(tx pgx.Tx) error {
		_, err := b.In.ProcessTx(ctx, tx, m, func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
			if _, err := inboxtest.Effect(m)(ctx, tx, m); err != nil {
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
	if n := inboxtest.Effects(t, b.DB, "key-1"); n != 0 {
		t.Fatalf("%d effects after the failed handler, want 0", n)
	}
	res, err := b.In.Process(ctx, m, inboxtest.Effect(m))
	if err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("redelivery %+v, %v; want Processed", res, err)
	}
	if n := inboxtest.Effects(t, b.DB, "key-1"); n != 1 {
		t.Fatalf("%d effects after the redelivery, want 1", n)
	}
}

// A pgx.Tx as the driver's handle is refused at once: its Begin would make
// savepoints that nobody else sees. Every call of the Inbox (Process,
// ProcessExternal, the consumer loop) goes through the handle New checked.
func TestTxRefusedAsBeginner(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx := context.Background()
	tx, err := b.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := inbox.New(inbox.Pgx(tx), &inbox.Config{Consumer: "billing"}); !errors.Is(err, inbox.ErrTxNotAllowed) {
		t.Fatalf("New with a Tx: %v", err)
	}
}

// A nil database, transaction or handler is refused with an error before
// anything is claimed, by New and every Process method of both drivers (it
// panicked mid-delivery).
func TestNilArgumentsRefused(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	sin := inboxtest.NewInbox(t, inbox.SQL(b.DB.SQL), &inbox.Config{Consumer: "billing-sql", Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	m := msg("m-1", "k-1", `{}`)
	tx, err := b.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	stx, err := b.DB.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stx.Rollback() }()
	noop := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", nil }
	sqlNoop := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }
	newErr := func(err error) func() (inbox.Result, error) {
		return func() (inbox.Result, error) { return inbox.Result{}, err }
	}
	cfg := func() *inbox.Config { return &inbox.Config{Consumer: "c"} }
	_, nilDriver := inbox.New[pgx.Tx](nil, cfg())
	_, nilPgx := inbox.New(inbox.Pgx(nil), cfg())
	_, nilSQL := inbox.New(inbox.SQL(nil), cfg())
	for name, call := range map[string]func() (inbox.Result, error){
		"New, nil driver":                  newErr(nilDriver),
		"New, Pgx(nil)":                    newErr(nilPgx),
		"New, SQL(nil)":                    newErr(nilSQL),
		"Process, nil handler":             func() (inbox.Result, error) { return b.In.Process(ctx, m, nil) },
		"ProcessTx, nil tx":                func() (inbox.Result, error) { return b.In.ProcessTx(ctx, nil, m, noop) },
		"ProcessTx, nil handler":           func() (inbox.Result, error) { return b.In.ProcessTx(ctx, tx, m, nil) },
		"ProcessExternal, nil handler":     func() (inbox.Result, error) { return b.In.ProcessExternal(ctx, m, nil) },
		"SQL Process, nil handler":         func() (inbox.Result, error) { return sin.Process(ctx, m, nil) },
		"SQL ProcessTx, nil tx":            func() (inbox.Result, error) { return sin.ProcessTx(ctx, nil, m, sqlNoop) },
		"SQL ProcessTx, nil handler":       func() (inbox.Result, error) { return sin.ProcessTx(ctx, stx, m, nil) },
		"SQL ProcessExternal, nil handler": func() (inbox.Result, error) { return sin.ProcessExternal(ctx, m, nil) },
	} {
		if _, err := call(); err == nil || !strings.HasSuffix(err.Error(), " is nil") {
			t.Errorf("%s: %v, want an error naming the nil argument", name, err)
		}
	}
	var rows int
	if err := b.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("inbox rows after the refused calls: %d (%v), want 0", rows, err)
	}
}

// With LogFullKeys the log carries the whole message ID and business key
// (by default they are shortened: TestKeysAndErrorsRedacted).
func TestLogsCarryMessageAndTransition(t *testing.T) {
	t.Parallel()
	var buf testenv.SyncBuffer
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 1, LogFullKeys: true, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	m := msg("m-1", "key-1", `{}`)
	_, err := b.In.Process(context.Background(), m, func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		return "", errors.New("boom")
	})
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &rec); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	want := map[string]any{"consumer": "billing", "message_id": "m-1", "business_key": "key-1", "from": "NEW",
		"to": "FAILED_FINAL", "attempt": float64(1), "reason": "max-attempts", "err": "boom", "outcome": "dead-lettered"}
	for k, v := range want {
		if rec[k] != v {
			t.Fatalf("log field %s = %v, want %v (record %v)", k, rec[k], v, rec)
		}
	}
}

// A handler error is bounded in last_error.
func TestLongErrorBounded(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	long := strings.Repeat("é", 4000) // 8,000 bytes
	_, err := b.In.Process(context.Background(), inbox.Message{ID: "m-1", BusinessKey: "k-1", Payload: []byte(`{}`)},
		func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) { return "", errors.New(long) })
	if err != nil {
		t.Fatal(err)
	}
	r := inboxtest.ReadRow(t, b.DB, "billing", "m-1")
	if r.LastError == nil || len(*r.LastError) > inbox.MaxErrorText || !strings.HasSuffix(*r.LastError, "(8000 bytes in all)") {
		t.Fatalf("last_error of %d bytes: %.80q…, want at most %d bytes ending with the full length", len(*r.LastError), *r.LastError, inbox.MaxErrorText)
	}
}
