package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

func TestMain(m *testing.M) {
	if crashChildMain() {
		return
	}
	testenv.MainWithDatabase(m) // DATABASE_URL for the examples
}

type bundle struct {
	db  *testenv.DB
	in  *inbox.Inbox
	reg *prometheus.Registry
}

// setup migrates a fresh database, creates the side-effect table and an
// Inbox for consumer "billing".
func setup(t *testing.T, cfg *inbox.Config) *bundle {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := context.Background()
	if cfg == nil {
		cfg = &inbox.Config{}
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "billing"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := inbox.Migrate(ctx, db.Pool, cfg.Table); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text NOT NULL, message_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	in, err := inbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, in: in, reg: reg}
}

// effect is a handler whose side effect is one row in table effect.
func effect(msg inbox.Message) inbox.TxHandler {
	return func(ctx context.Context, tx pgx.Tx) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "ref-" + msg.BusinessKey, err
	}
}

func effects(t *testing.T, db *testenv.DB, key string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effect WHERE business_key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantEffectOnce fails t unless the effect of each key happened exactly
// once.
func wantEffectOnce(t *testing.T, db *testenv.DB, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if n := effects(t, db, key); n != 1 {
			t.Fatalf("effect of %s happened %d times", key, n)
		}
	}
}

type row struct {
	Status    string
	Attempts  int
	LastError *string
	ResultRef *string
}

func readRow(t *testing.T, db *testenv.DB, consumer, id string) row {
	t.Helper()
	var r row
	err := db.Pool.QueryRow(context.Background(), `SELECT status, attempts, last_error, result_ref FROM inbox
		WHERE consumer = $1 AND message_id = $2`, consumer, id).Scan(&r.Status, &r.Attempts, &r.LastError, &r.ResultRef)
	if err != nil {
		t.Fatalf("read inbox row %s: %v", id, err)
	}
	return r
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
	onBothPaths(t, inbox.Config{}, func(t *testing.T, b *bundle, p dbPath) {
		ctx := context.Background()
		const workers = 24
		m := msg("m-1", "pay-1", `{"amount":1}`)
		m2 := msg("m-2", "pay-1", `{"amount":1}`)
		results := deliverConcurrently(t, workers, func(i int) (inbox.Result, error) {
			if i%2 == 1 {
				return p.process(ctx, m2)
			}
			return p.process(ctx, m)
		})
		if results[inbox.Processed] != 1 || results[inbox.Duplicate] != workers-1 {
			t.Fatalf("outcomes %v, want 1 processed and %d duplicates", results, workers-1)
		}
		if n := effects(t, b.db, "pay-1"); n != 1 {
			t.Fatalf("side effect happened %d times, want 1", n)
		}
		if got := metricValue(t, b.reg, "pgoutbox_inbox_messages_total", "outcome", "duplicate"); got != workers-1 {
			t.Fatalf("duplicate metric %v", got)
		}
	})
}

func TestOutcomeMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyDeadLetter, MaxAttempts: 1})
	ctx := context.Background()
	first := msg("m-1", "key-1", `{"v":1}`)
	if res, err := b.in.Process(ctx, b.db.Pool, first, effect(first)); err != nil || res.Outcome != inbox.Processed || res.ResultRef != "ref-key-1" {
		t.Fatalf("first delivery: %+v, %v", res, err)
	}
	// A message that will be dead-lettered.
	bad := msg("m-bad", "key-bad", `{}`)
	failing := func(context.Context, pgx.Tx) (string, error) { return "", errors.New("boom") }
	if res, err := b.in.Process(ctx, b.db.Pool, bad, failing); err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonMaxAttempts {
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
			res, err := b.in.Process(ctx, b.db.Pool, tc.msg, func(ctx context.Context, tx pgx.Tx) (string, error) {
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
	if n := effects(t, b.db, "key-1"); n != 1 {
		t.Fatalf("side effect happened %d times", n)
	}
}

func TestConflictPolicyStopReturnsConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyStop})
	ctx := context.Background()
	m := msg("m-1", "key-1", `1`)
	if _, err := b.in.Process(ctx, b.db.Pool, m, effect(m)); err != nil {
		t.Fatal(err)
	}
	res, err := b.in.Process(ctx, b.db.Pool, msg("m-1", "key-2", `1`), effect(m))
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
	b := setup(t, &inbox.Config{MaxAttempts: 3})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	failing := func(ctx context.Context, tx pgx.Tx) (string, error) {
		if _, err := effect(m)(ctx, tx); err != nil {
			return "", err
		}
		return "", fmt.Errorf("gateway down")
	}
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := b.in.Process(ctx, b.db.Pool, m, failing)
		if err != nil {
			t.Fatal(err)
		}
		r := readRow(t, b.db, "billing", "m-1")
		if effects(t, b.db, "key-1") != 0 {
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
	res, err := b.in.Process(ctx, b.db.Pool, m, func(context.Context, pgx.Tx) (string, error) {
		t.Fatal("handler ran for a FAILED_FINAL message")
		return "", nil
	})
	if err != nil || res.Outcome != inbox.DeadLettered {
		t.Fatalf("redelivery %+v, %v", res, err)
	}
	// Revive makes it processable again.
	if n, err := b.in.Revive(ctx, b.db.Pool, "m-1"); err != nil || n != 1 {
		t.Fatalf("revive %d, %v", n, err)
	}
	res, err = b.in.Process(ctx, b.db.Pool, m, effect(m))
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 1 {
		t.Fatalf("after revive %+v, %v", res, err)
	}
	if effects(t, b.db, "key-1") != 1 {
		t.Fatal("revived message did not run once")
	}
	if got := metricValue(t, b.reg, "pgoutbox_inbox_retries_total", "", ""); got != 2 {
		t.Fatalf("retries metric %v, want 2", got)
	}
	if got := metricValue(t, b.reg, "pgoutbox_inbox_dead_lettered_total", "reason", "max_attempts"); got != 1 {
		t.Fatalf("dead-lettered metric %v, want 1", got)
	}
}

func TestPermanentErrorDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 10})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	res, err := b.in.Process(ctx, b.db.Pool, m, func(context.Context, pgx.Tx) (string, error) {
		return "", inbox.Permanent(errors.New("invalid amount"))
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent || res.Attempts != 1 {
		t.Fatalf("got %+v, %v", res, err)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "FAILED_FINAL" {
		t.Fatalf("row %+v", r)
	}
}

func TestSerializationFailureRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	calls := 0
	res, err := b.in.Process(ctx, b.db.Pool, m, func(ctx context.Context, tx pgx.Tx) (string, error) {
		calls++
		if calls < 3 {
			_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure'; END $$`)
			return "", err
		}
		return effect(m)(ctx, tx)
	})
	if err != nil || res.Outcome != inbox.Processed || calls != 3 {
		t.Fatalf("got %+v, %v after %d calls", res, err, calls)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Attempts != 1 || r.Status != "COMPLETED" {
		t.Fatalf("row %+v", r)
	}
}

func TestProcessTxInCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 2})
	ctx := context.Background()
	ok := msg("m-1", "key-1", `{}`)
	bad := msg("m-2", "key-2", `{}`)
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		res, err := b.in.ProcessTx(ctx, tx, ok, effect(ok))
		if err != nil || res.Outcome != inbox.Processed {
			return fmt.Errorf("ok: %+v, %w", res, err)
		}
		res, err = b.in.ProcessTx(ctx, tx, bad, func(ctx context.Context, tx pgx.Tx) (string, error) {
			if _, err := effect(bad)(ctx, tx); err != nil {
				return "", err
			}
			return "", errors.New("nope")
		})
		if err != nil || res.Outcome != inbox.Retry {
			return fmt.Errorf("bad: %+v, %w", res, err)
		}
		res, err = b.in.ProcessTx(ctx, tx, ok, effect(ok))
		if err != nil || res.Outcome != inbox.Duplicate {
			return fmt.Errorf("dup: %+v, %w", res, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if effects(t, b.db, "key-1") != 1 || effects(t, b.db, "key-2") != 0 {
		t.Fatal("effects not as committed")
	}
	if r := readRow(t, b.db, "billing", "m-2"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
	// A rolled-back caller transaction leaves nothing behind.
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m3 := msg("m-3", "key-3", `{}`)
	if res, err := b.in.ProcessTx(ctx, tx, m3, effect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	_ = tx.Rollback(ctx)
	if res, err := b.in.Process(ctx, b.db.Pool, m3, effect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
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
		res, err := deliver(func(ctx context.Context, _ string) (string, error) {
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
	onBothPaths(t, inbox.Config{LeaseDuration: time.Hour}, func(t *testing.T, b *bundle, p dbPath) {
		ctx := context.Background()
		m := msg("m-1", "pay-1", `{"amount":5}`)

		// The first delivery holds the lease while its handler runs.
		release, first := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
			return p.processExternal(ctx, m, h)
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
		res, err := p.processExternal(ctx, m, func(context.Context, string) (string, error) {
			t.Error("handler ran under a live lease")
			return "", nil
		})
		if err != nil || res.Outcome != inbox.Busy {
			t.Fatalf("live lease: %+v, %v", res, err)
		}
		// The transactional path respects the lease too.
		if res, err := p.process(ctx, m); err != nil || res.Outcome != inbox.Busy {
			t.Fatalf("live lease, tx path: %+v, %v", res, err)
		}
		release()
		if d := <-first; d.err != nil || d.res.Outcome != inbox.Processed || d.res.ResultRef != "charge-1" || d.res.IdempotencyKey != "pay-1" {
			t.Fatalf("first delivery %+v, %v", d.res, d.err)
		}
		if res, err := p.processExternal(ctx, m, nil); err != nil || res.Outcome != inbox.Duplicate || res.ResultRef != "charge-1" {
			t.Fatalf("after completion %+v, %v", res, err)
		}
		var ref string
		if err := b.db.Pool.QueryRow(ctx, `SELECT request_ref FROM inbox WHERE message_id = 'm-1'`).Scan(&ref); err != nil || ref != "req-1" {
			t.Fatalf("request_ref %q, %v", ref, err)
		}
	})
}

func TestTwoPhaseExpiredLeaseTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{LeaseDuration: time.Hour})
	ctx := context.Background()
	m := msg("m-1", "pay-1", `{"amount":5}`)

	// A worker claims and "crashes" inside its handler: its lease stays.
	release, crashed := heldExternal(t, func(h inbox.ExternalHandler) (inbox.Result, error) {
		return b.in.ProcessExternal(ctx, b.db.Pool, m, h)
	}, func(_ context.Context, held func()) (string, error) {
		held()
		return "", errors.New("crash")
	})
	// Expire the lease.
	if _, err := b.db.Pool.Exec(ctx, `UPDATE inbox SET locked_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	counts, err := b.in.Stats(ctx, b.db.Pool)
	if err != nil || len(counts) != 1 || counts[0].Status != inbox.StatusProcessing || counts[0].Stuck != 1 {
		t.Fatalf("stats %+v, %v", counts, err)
	}
	if got := metricValue(t, b.reg, "pgoutbox_inbox_stuck_processing", "", ""); got != 1 {
		t.Fatalf("stuck gauge %v", got)
	}
	var gotKey string
	res, err := b.in.ProcessExternal(ctx, b.db.Pool, m, func(ctx context.Context, key string) (string, error) {
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
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "COMPLETED" || r.Attempts != 2 || *r.ResultRef != "charge-1" {
		t.Fatalf("row %+v", r)
	}
}

// With LogFullKeys the log carries the whole message ID and business key
// (by default they are shortened: TestKeysAndErrorsRedacted).
func TestLogsCarryMessageAndTransition(t *testing.T) {
	t.Parallel()
	var buf testenv.SyncBuffer
	b := setup(t, &inbox.Config{MaxAttempts: 1, LogFullKeys: true, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	m := msg("m-1", "key-1", `{}`)
	_, err := b.in.Process(context.Background(), b.db.Pool, m, func(context.Context, pgx.Tx) (string, error) {
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
		"to": "FAILED_FINAL", "attempt": float64(1), "reason": "max_attempts", "err": "boom", "outcome": "dead_lettered"}
	for k, v := range want {
		if rec[k] != v {
			t.Fatalf("log field %s = %v, want %v (record %v)", k, rec[k], v, rec)
		}
	}
}
