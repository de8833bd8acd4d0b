package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// PostgreSQL 18 invalidates, at a checkpoint, a slot that no one streamed
// for longer than idle_replication_slot_timeout. A relay down that long
// finds a gap, never a silent skip: relay status shows it (slot-lost,
// naming the setting, and the slot's invalidation_reason), Run stops on it
// with the gap metric at 1, and Run with --on-gap=backfill publishes the
// rows committed while the relay was down, then streams. It skips below
// PG 18.
func TestGapSlotIdleTimeout(t *testing.T) {
	t.Parallel()
	b, _ := ownServer(t, func(c *relay.Config) { c.BackfillMargin = time.Second })
	ctx := context.Background()
	version := b.needPostgres(t, 18, "idle_replication_slot_timeout")
	before := b.streamSome(t, 3)
	during := b.insert(t, msg("idle", 1), msg("idle", 2))
	b.exec(t, `ALTER SYSTEM SET idle_replication_slot_timeout = '1s'`, `SELECT pg_reload_conf()`)
	testenv.WaitFor(t, time.Minute, "a checkpoint to invalidate the idle slot", func() (bool, error) {
		if _, err := b.db.Pool.Exec(ctx, `CHECKPOINT`); err != nil {
			return false, err
		}
		var reason string
		err := b.db.Pool.QueryRow(ctx, `SELECT coalesce(invalidation_reason, '') FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&reason)
		return reason == "idle_timeout", err
	})
	// The slot recovery makes must not go the same way before the relay
	// streams it.
	b.exec(t, `ALTER SYSTEM RESET idle_replication_slot_timeout`, `SELECT pg_reload_conf()`)

	st, err := relay.Status(ctx, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gap == nil || st.Gap.Reason != relaytype.GapSlotLost || !strings.Contains(st.Gap.Detail, "idle_replication_slot_timeout") ||
		st.InvalidationReason != "idle_timeout" {
		t.Fatalf("relay status: gap %+v, invalidation reason %q; want slot-lost naming idle_replication_slot_timeout, idle_timeout", st.Gap, st.InvalidationReason)
	}
	gap := b.runGap(t)
	if gap.Reason != relaytype.GapSlotLost || !errors.Is(gap, relaytype.ErrSlotInvalidated) || !strings.Contains(gap.Error(), "idle_replication_slot_timeout") {
		t.Fatalf("Run's gap: %v; want %s wrapping ErrSlotInvalidated, naming idle_replication_slot_timeout", gap, relaytype.GapSlotLost)
	}
	b.cfg.OnGap = relay.GapBackfill
	run := b.start(t)
	after := b.insert(t, msg("after", 1))
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", append(append(append([]string{}, before...), during...), after...), time.Minute)
	if n := missingIDs(recs, during); n != 0 {
		t.Fatalf("%d rows committed while the relay was down are missing", n)
	}
	t.Logf("idle timeout on PostgreSQL %d: %d rows committed while the slot was idle, all in Kafka after the backfill", version, len(during))
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}
