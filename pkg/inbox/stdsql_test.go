package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// The database/sql path, through pgx's stdlib driver: the same inbox, the
// same table, the handler gets a *sql.Tx.

func TestSQLHandlerErrorRollsBack(t *testing.T) {
	t.Parallel()
	b := inboxtest.SetupSQL(t, &inbox.Config{MaxAttempts: 5})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	failing := func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := inboxtest.SQLEffect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		return "", errors.New("downstream refused")
	}
	res, err := b.SQLIn.Process(ctx, m, failing)
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 1 {
		t.Fatalf("failing handler: %+v, %v", res, err)
	}
	if n := inboxtest.Effects(t, b.DB, "key-1"); n != 0 {
		t.Fatalf("%d effect rows survived the handler's error", n)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 || r.LastError == nil || *r.LastError != "downstream refused" {
		t.Fatalf("row after the failure: %+v", r)
	}
	// A panic is a failed attempt too, its writes rolled back.
	res, err = b.SQLIn.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := inboxtest.SQLEffect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		panic("boom")
	})
	var perr *inbox.PanicError
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 2 || !errors.As(res.Err, &perr) {
		t.Fatalf("panicking handler: %+v, %v", res, err)
	}
	// A handler whose statement fails leaves the transaction aborted; the
	// rollback still records the attempt.
	res, err = b.SQLIn.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 3 {
		t.Fatalf("failing statement: %+v, %v", res, err)
	}
	res, err = b.SQLIn.Process(ctx, m, inboxtest.SQLEffect(m))
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 4 || res.ResultRef != "ref-key-1" {
		t.Fatalf("succeeding handler: %+v, %v", res, err)
	}
	if n := inboxtest.Effects(t, b.DB, "key-1"); n != 1 {
		t.Fatalf("effect rows %d, want 1", n)
	}
	if res, err := b.SQLIn.Process(ctx, m, inboxtest.SQLEffect(m)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
	p := msg("m-2", "key-2", `{}`)
	res, err = b.SQLIn.Process(ctx, p, func(context.Context, *sql.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("invalid amount"))
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent {
		t.Fatalf("permanent error: %+v, %v", res, err)
	}
}

func TestSQLProcessTxInCallerTransaction(t *testing.T) {
	t.Parallel()
	b := inboxtest.SetupSQL(t, &inbox.Config{MaxAttempts: 2})
	db := b.DB.SQL
	ctx := context.Background()
	ok := msg("m-1", "key-1", `{}`)
	bad := msg("m-2", "key-2", `{}`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // on a failure: db.Close waits for open transactions
	if res, err := b.SQLIn.ProcessTx(ctx, tx, ok, inboxtest.SQLEffect(ok)); err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("ok: %+v, %v", res, err)
	}
	res, err := b.SQLIn.ProcessTx(ctx, tx, bad, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := inboxtest.SQLEffect(bad)(ctx, tx, bad); err != nil {
			return "", err
		}
		_, err := tx.ExecContext(ctx, `SELECT 1/0`) // aborts the transaction: the savepoint saves it
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatalf("bad: %+v, %v", res, err)
	}
	if res, err := b.SQLIn.ProcessTx(ctx, tx, ok, inboxtest.SQLEffect(ok)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("dup: %+v, %v", res, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if inboxtest.Effects(t, b.DB, "key-1") != 1 || inboxtest.Effects(t, b.DB, "key-2") != 0 {
		t.Fatal("effects not as committed")
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-2"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
	// A rolled-back caller transaction leaves nothing behind.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m3 := msg("m-3", "key-3", `{}`)
	if res, err := b.SQLIn.ProcessTx(ctx, tx, m3, inboxtest.SQLEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	_ = tx.Rollback()
	if res, err := b.SQLIn.Process(ctx, m3, inboxtest.SQLEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
}

// beginnerStub is a Beginner that is never called.
type beginnerStub struct{}

func (beginnerStub) Begin(context.Context) (pgx.Tx, error) { return nil, errors.New("stub") }
