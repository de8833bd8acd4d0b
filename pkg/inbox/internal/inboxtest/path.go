package inboxtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// DBPath is one of the inbox's two drivers, pgx or database/sql, with the
// Inbox of a Bundle on it.
type DBPath[TTx any] struct {
	In *inbox.Inbox[TTx]
	// Effect is Effect or SQLEffect.
	Effect func(msg inbox.Message) inbox.TxHandler[TTx]
}

// Process delivers m with a handler that writes its effect row.
func (p DBPath[TTx]) Process(ctx context.Context, m inbox.Message) (inbox.Result, error) {
	return p.In.Process(ctx, m, p.Effect(m))
}

// ProcessExternal delivers m on the two-phase path.
func (p DBPath[TTx]) ProcessExternal(ctx context.Context, m inbox.Message, h inbox.ExternalHandler) (inbox.Result, error) {
	return p.In.ProcessExternal(ctx, m, h)
}

// ConsumerHandler writes the message's effect row and then fails with
// fail's error (nil: success).
func (p DBPath[TTx]) ConsumerHandler(fail func(inbox.Message) error) inbox.TxHandler[TTx] {
	return func(ctx context.Context, tx TTx, msg inbox.Message) (string, error) {
		if _, err := p.Effect(msg)(ctx, tx, msg); err != nil {
			return "", err
		}
		return "", fail(msg)
	}
}

// OnBothPaths runs test in parallel subtests on pgx (onPgx) and on
// database/sql (onSQL, the same test instantiated for *sql.Tx), each on a
// Bundle of its own made with a copy of cfg.
func OnBothPaths(t *testing.T, cfg inbox.Config, onPgx func(t *testing.T, b *Bundle, p DBPath[pgx.Tx]),
	onSQL func(t *testing.T, b *Bundle, p DBPath[*sql.Tx])) {
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := Setup(t, &c)
		onPgx(t, b, DBPath[pgx.Tx]{In: b.In, Effect: Effect})
	})
	t.Run("database/sql", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := SetupSQL(t, &c)
		onSQL(t, b, DBPath[*sql.Tx]{In: b.SQLIn, Effect: SQLEffect})
	})
}
