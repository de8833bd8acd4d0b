package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A panicking handler is recovered on every path and counted as a failed
// attempt: Retry, then DeadLettered at MaxAttempts.
func TestHandlerPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, &inbox.Config{MaxAttempts: 2, LeaseDuration: time.Minute})
	ctx := context.Background()
	boom := func(context.Context, pgx.Tx, inbox.Message) (string, error) { panic("boom") }
	check := func(name string, res inbox.Result, err error, outcome inbox.Outcome, attempts int) {
		t.Helper()
		var perr *inbox.PanicError
		if err != nil || res.Outcome != outcome || res.Attempts != attempts || !errors.As(res.Err, &perr) ||
			perr.Value != "boom" || len(perr.Stack) == 0 {
			t.Fatalf("%s: %+v, %v; want %v after %d attempts with a PanicError", name, res, err, outcome, attempts)
		}
	}

	m := msg("m-1", "k-1", `{}`)
	res, err := b.In.Process(ctx, m, boom)
	check("Process 1", res, err, inbox.Retry, 1)
	res, err = b.In.Process(ctx, m, boom)
	check("Process 2", res, err, inbox.DeadLettered, 2)
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-1"); r.Status != "FAILED_FINAL" || *r.LastError != "handler panicked: boom" {
		t.Fatalf("row %+v", r)
	}

	tx, err := b.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err = b.In.ProcessTx(ctx, tx, msg("m-2", "k-2", `{}`), boom)
	check("ProcessTx", res, err, inbox.Retry, 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	res, err = b.In.ProcessExternal(ctx, msg("m-3", "k-3", `{}`), func(context.Context, inbox.Message, string) (string, error) {
		panic("boom")
	})
	check("ProcessExternal", res, err, inbox.Retry, 1)
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-3"); r.Status != "FAILED_RETRYABLE" {
		t.Fatalf("row %+v", r)
	}
}
