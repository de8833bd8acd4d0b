package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
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

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// Statements that stand alone (the two-phase completion, a failure record)
// run in autocommit mode: one round trip, not BEGIN, statement, COMMIT.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	trace := &statements{}
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	m := msg("m-1", "k-1", `{}`)
	if res, err := b.in.Process(ctx, pool, m, effect(m)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	// BEGIN, the claim, the handler's INSERT, the result reference, COMMIT.
	if got := trace.take(); strings.Join(got, " ") != "begin INSERT INSERT UPDATE commit" {
		t.Errorf("transactional path: %v", got)
	}
	f := msg("m-2", "k-2", `{}`)
	res, err := b.in.Process(ctx, pool, f, func(context.Context, pgx.Tx) (string, error) { return "", errors.New("no") })
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatal(res, err)
	}
	// The attempt is recorded in one statement after the rollback.
	if got := trace.take(); strings.Join(got, " ") != "begin INSERT rollback INSERT" {
		t.Errorf("failed attempt: %v", got)
	}
	x := msg("m-3", "k-3", `{}`)
	res, err = b.in.ProcessExternal(ctx, pool, x, func(context.Context, string) (string, error) { return "ref", nil })
	if err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	// The claim commits its lease, the completion is one statement.
	if got := trace.take(); strings.Join(got, " ") != "begin INSERT commit UPDATE" {
		t.Errorf("two-phase path: %v", got)
	}
}
