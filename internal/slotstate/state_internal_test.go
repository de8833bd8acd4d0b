package slotstate

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Cover returns once the state row's ceiling covers the position it was
// given (the keeper writes the row for it), and with the context's error
// when that ends first; Reincarnate gives the row a new incarnation, and
// EnsureSlot gives one to a row without.
func TestKeeperCoverAndIncarnation(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	c := &Config{DatabaseURL: db.URL, Slot: "cover", Publication: "p_cover", Table: "public.outbox",
		TableFormat: relaytype.TableFormatPgoutbox, Logger: slog.New(slog.DiscardHandler)}
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := EnsurePublication(ctx, conn, c, true); err != nil {
		t.Fatal(err)
	}
	start, st, err := EnsureSlot(ctx, conn, c, true)
	if err != nil {
		t.Fatal(err)
	}
	first := st.Incarnation
	if first == "" {
		t.Fatal("a new slot's state row has no incarnation")
	}

	k := NewKeeper()
	k.Start(st)
	var l pgconnect.Live
	l.Tracker.Store(acktrack.New(uint64(start)))
	l.Leader.Store(true)
	keepCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { k.Keep(keepCtx, c, &l); close(done) }()
	defer func() { stop(); <-done }()
	var s string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	pos, _ := pglogrepl.ParseLSN(s)
	if pos <= st.Ceiling {
		t.Fatalf("the WAL %s is not past the ceiling %s", pos, st.Ceiling)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := k.Cover(wait, pos); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadState(ctx, conn, c); err != nil || got.Ceiling < pos {
		t.Fatalf("state %+v, %v; want a ceiling at %s or past it", got, err, pos)
	}
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	if err := k.Cover(gone, pos+1<<40); !errors.Is(err, context.Canceled) {
		t.Fatalf("Cover past the WAL with an ended context: %v, want context.Canceled", err)
	}

	if err := Reincarnate(ctx, conn, c, st); err != nil || st.Incarnation == first || st.Incarnation == "" {
		t.Fatalf("Reincarnate: %v, incarnation %q (was %q)", err, st.Incarnation, first)
	}
	if _, err := conn.Exec(ctx, `UPDATE pgoutbox_relay_state SET incarnation = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, st, err = EnsureSlot(ctx, conn, c, false); err != nil || st.Incarnation == "" {
		t.Fatalf("EnsureSlot on a row without an incarnation: %+v, %v; want one given", st, err)
	}
}
