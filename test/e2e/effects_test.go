package e2e

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// effectInbox migrates db for an inbox consumer "e2e" whose effect is a
// row of table effect (no unique constraint of its own), and returns the
// Inbox and the handler that writes the effect.
func effectInbox(t *testing.T, db *testenv.DB) (*inbox.Inbox[pgx.Tx], inbox.TxHandler[pgx.Tx]) {
	t.Helper()
	ctx := context.Background()
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (message_id text NOT NULL, business_key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return in, func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect (message_id, business_key) VALUES ($1, $2)`, msg.ID, msg.BusinessKey)
		return "", err
	}
}

// checkEffectsOnce fails t unless every message l committed took effect
// in db exactly once and no rolled-back one did; it returns the effects
// per message ID and how many committed messages have none.
func checkEffectsOnce(t *testing.T, db *testenv.DB, l *ledger) (effects map[string]int, missing int) {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT message_id, count(*) FROM effect GROUP BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	effects = make(map[string]int)
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		effects[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ids := range l.committed {
		for _, id := range ids {
			switch n := effects[id.String()]; {
			case n == 0:
				if missing++; missing <= 10 {
					t.Errorf("committed message %s has no effect", id)
				}
			case n > 1:
				t.Errorf("message %s took effect %d times", id, n)
			}
		}
	}
	if len(effects) != l.count {
		t.Errorf("%d messages took effect, %d were committed", len(effects), l.count)
	}
	for id := range l.rolledBack {
		if effects[id.String()] > 0 {
			t.Errorf("rolled-back message %s took effect", id)
		}
	}
	return effects, missing
}

// publishTwiceWithKills runs the writers into l while a relay streams
// slots[1] and another on slots[0] is SIGKILLed kills times, then waits
// until both slots are confirmed past a last commit: every message is
// published at least twice. args gives a command's arguments for a slot.
func publishTwiceWithKills(t *testing.T, bin string, pool *pgxpool.Pool, slots []string, kills int, l *ledger, args func(cmd, slot string) []string) {
	t.Helper()
	logPath := relayLog(t)
	stopWriters := startWriters(t, pool, l)
	second := startRelay(t, bin, logPath, args("run", slots[1])...)
	killRepeatedly(t, bin, logPath, args("run", slots[0]), pool, slots[0], kills, l, nil)
	stopWriters()

	// Drain: both slots confirmed past the last commit.
	endLSN := writeFence(t, pool, l)
	last := startRelay(t, bin, logPath, args("run", slots[0])...)
	for _, slot := range slots {
		waitConfirmed(t, pool, slot, endLSN, last, second)
	}
}
