package inbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
)

// statements records the statements a pool sends, one per round trip.
type statements struct {
	mu   sync.Mutex
	sent []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strings.Fields(d.SQL)[0])
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip; its statements are recorded as one entry,
// "begin+INSERT".
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	words := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		words = append(words, strings.Fields(q.SQL)[0])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strings.Join(words, "+"))
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// tracedInbox is an Inbox of consumer billing on b's database, on a pool
// of its own whose statements trace records.
func tracedInbox(t *testing.T, b *inboxtest.Bundle) (*inbox.Inbox[pgx.Tx], *statements) {
	t.Helper()
	trace := &statements{}
	in, _ := inboxOnPool(t, b, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = trace })
	return in, trace
}

// inboxOnPool is an Inbox of consumer billing on b's database, on a pool
// of its own that configure adjusts, and that pool (closed at the test's
// end).
func inboxOnPool(t *testing.T, b *inboxtest.Bundle, configure func(*pgxpool.Config)) (*inbox.Inbox[pgx.Tx], *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(b.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return inboxtest.NewInbox(t, inbox.Pgx(pool), &inbox.Config{Consumer: "billing", Logger: slog.New(slog.DiscardHandler)}), pool
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// The claim travels with BEGIN in one round trip, and statements that stand
// alone (the two-phase completion, a failure record) run in autocommit mode:
// one round trip, not BEGIN, statement, COMMIT.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx := context.Background()
	in, trace := tracedInbox(t, b)

	m := msg("m-1", "k-1", `{}`)
	if res, err := in.Process(ctx, m, inboxtest.Effect(m)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	// BEGIN with the claim, the handler's INSERT, the result reference,
	// COMMIT.
	if got := trace.take(); strings.Join(got, " ") != "begin+INSERT INSERT UPDATE commit" {
		t.Errorf("transactional path: %v", got)
	}
	// Without a result reference: BEGIN with the claim, the handler's
	// INSERT, COMMIT; a dedup table written by hand takes one more.
	plain := func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect (business_key, message_id) VALUES ('k-p', 'm-p')`)
		return "", err
	}
	p := msg("m-p", "k-p", `{}`)
	if res, err := in.Process(ctx, p, plain); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	if got := trace.take(); strings.Join(got, " ") != "begin+INSERT INSERT commit" {
		t.Errorf("transactional path without a result reference: %v", got)
	}
	// A duplicate: the claim inserts nothing, the lookup finds the row.
	if res, err := in.Process(ctx, p, plain); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatal(res, err)
	}
	if got := trace.take(); strings.Join(got, " ") != "begin+INSERT SELECT commit" {
		t.Errorf("duplicate: %v", got)
	}
	f := msg("m-2", "k-2", `{}`)
	res, err := in.Process(ctx, f, func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", errors.New("no") })
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatal(res, err)
	}
	// The attempt is recorded in one statement after the rollback.
	if got := trace.take(); strings.Join(got, " ") != "begin+INSERT rollback INSERT" {
		t.Errorf("failed attempt: %v", got)
	}
	x := msg("m-3", "k-3", `{}`)
	res, err = in.ProcessExternal(ctx, x, func(context.Context, inbox.Message, string) (string, error) { return "ref", nil })
	if err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	// The claim commits its lease, the completion is one statement.
	if got := trace.take(); strings.Join(got, " ") != "begin+INSERT commit UPDATE" {
		t.Errorf("two-phase path: %v", got)
	}
}

// A claim that fails inside the batch that begins its transaction rolls the
// transaction back and returns the connection to the pool in working order.
func TestClaimFailureInFirstBatch(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inboxtest.RefuseClaims(t, b.DB, "k-refused")
	in, pool := inboxOnPool(t, b, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })

	bad := msg("m-refused", "k-refused", `{}`)
	_, err := in.Process(ctx, bad, inboxtest.Effect(bad))
	if err == nil || !strings.Contains(err.Error(), "22023") {
		t.Fatalf("Process of a refused claim: %v", err)
	}
	// With one connection, a leaked one would block here until ctx ends.
	good := msg("m-good", "k-good", `{}`)
	if res, err := in.Process(ctx, good, inboxtest.Effect(good)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	if st := pool.Stat(); st.NewConnsCount() != 1 || st.AcquiredConns() != 0 {
		t.Fatalf("pool after the failure: %d connections made, %d acquired", st.NewConnsCount(), st.AcquiredConns())
	}
	if n := inboxtest.Effects(t, b.DB, "k-refused"); n != 0 {
		t.Fatalf("refused message had %d effects", n)
	}
}

// A delivery the consumer loop marks first (one that may repeat an attempt
// that killed a process) takes three round trips besides the handler's
// statements: the marker, BEGIN with the claim that completes the marked
// row in place, and COMMIT; before, the claim's INSERT met the marked row
// and a lookup, a takeover and a completion followed. Its attempts are
// counted as before: a failure records the marked attempt, the next
// delivery counts another, and the row ends COMPLETED at its position.
func TestMarkedDeliveryRoundTrips(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	ctx := context.Background()
	in, trace := tracedInbox(t, b)
	// The consumer loop's entry, which marks the attempt first.
	loop := loophook.Internals(in).(interface {
		Process(context.Context, inbox.Message, inbox.TxHandler[pgx.Tx], bool) (inbox.Result, error)
	})
	fail := true
	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) (string, error) {
		if fail {
			return "", errors.New("not yet")
		}
		_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, $2)`, m.BusinessKey, m.ID)
		return "", err
	}
	m := inbox.Message{ID: "m-1", BusinessKey: "k-1", Payload: []byte(`{}`), Topic: "t", Partition: 2, Offset: 7}
	res, err := loop.Process(ctx, m, handler, true)
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 1 {
		t.Fatalf("failed marked delivery: %+v, %v", res, err)
	}
	if got := strings.Join(trace.take(), " "); got != "WITH begin+UPDATE rollback INSERT" {
		t.Errorf("failed marked delivery: %s", got)
	}
	fail = false
	res, err = loop.Process(ctx, m, handler, true)
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 2 {
		t.Fatalf("marked delivery: %+v, %v", res, err)
	}
	if got := strings.Join(trace.take(), " "); got != "WITH begin+UPDATE INSERT commit" {
		t.Errorf("marked delivery: %s", got)
	}
	var (
		status         string
		attempts, part int
		off            int64
	)
	if err := b.DB.Pool.QueryRow(ctx, `SELECT status, attempts, "partition", "offset" FROM inbox WHERE message_id = 'm-1'`).
		Scan(&status, &attempts, &part, &off); err != nil {
		t.Fatal(err)
	}
	if status != "COMPLETED" || attempts != 2 || part != 2 || off != 7 {
		t.Fatalf("row: %s, %d attempts, at %d@%d", status, attempts, part, off)
	}
}
