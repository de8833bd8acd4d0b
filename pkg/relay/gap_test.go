package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// runGap runs a relay on b.cfg and returns the gap it stops with, failing
// t when it does not stop on one.
func (b *bundle) runGap(t *testing.T) *relaytype.GapError {
	t.Helper()
	r := b.newRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.Run(ctx)
	var gap *relaytype.GapError
	if !errors.As(err, &gap) || !errors.Is(err, relaytype.ErrGap) || !relay.IsPermanent(err) {
		t.Fatalf("Run: %v, want a permanent *GapError", err)
	}
	if v := b.metric(t, "pgoutbox_relay_gap"); v != 1 {
		t.Errorf("pgoutbox_relay_gap = %v, want 1", v)
	}
	return gap
}

// slotExists reports whether b's slot exists.
func (b *bundle) slotExists(t *testing.T) bool {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// streamSome runs the relay until ids are in Kafka and stops it.
func (b *bundle) streamSome(t *testing.T, n int) []string {
	t.Helper()
	run := b.start(t)
	var ids []string
	for i := range n {
		ids = append(ids, b.insert(t, msg(fmt.Sprintf("agg-%d", i%3), i))...)
	}
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	return ids
}

// dropSlot drops b's slot once its walsender is gone.
func (b *bundle) dropSlot(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "slot dropped", func() (bool, error) {
		_, err := b.db.Pool.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, b.cfg.Slot)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55006" { // still active
			return false, nil
		}
		return err == nil, err
	})
}

// distinctIDs counts the message IDs of recs, and how many records were
// copies.
func distinctIDs(recs []testenv.Record) (distinct, duplicates int) {
	seen := map[string]bool{}
	for _, r := range recs {
		id, _ := r.Header("message-id")
		if seen[id] {
			duplicates++
		}
		seen[id] = true
	}
	return len(seen), duplicates
}

// A slot dropped while the relay is down is a gap: Run, a standby's
// retry and setup refuse it without re-creating the slot, status shows
// it; Recover publishes every row committed meanwhile, and the relay
// streams on from the new slot.
func TestGapSlotDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.BackfillMargin = time.Second })
	ctx := context.Background()
	before := b.streamSome(t, 6)
	b.dropSlot(t)
	var during []string
	for i := range 5 {
		during = append(during, b.insert(t, msg("d", i))...)
	}

	gap := b.runGap(t)
	if gap.Reason != relaytype.GapSlotMissing || gap.Slot != b.cfg.Slot || gap.Since.IsZero() {
		t.Fatalf("gap %+v, want reason %s on slot %s with a since time", gap, relaytype.GapSlotMissing, b.cfg.Slot)
	}
	text := gap.Error()
	if strings.Contains(text, "\n") || !strings.Contains(text, b.cfg.Slot) || !strings.Contains(text, "relay recover") {
		t.Errorf("gap error is not one line naming the slot and the fix: %q", text)
	}
	if b.slotExists(t) {
		t.Fatal("Run re-created the dropped slot")
	}
	if err := relay.Setup(ctx, b.cfg); !errors.Is(err, relaytype.ErrGap) {
		t.Fatalf("Setup over a gap: %v, want ErrGap", err)
	}
	if b.slotExists(t) {
		t.Fatal("Setup re-created the dropped slot")
	}
	st, err := relay.Status(ctx, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gap == nil || st.Gap.Reason != relaytype.GapSlotMissing || len(st.Problems) == 0 {
		t.Fatalf("status gap %+v, problems %q; want the gap", st.Gap, st.Problems)
	}

	res, err := relay.Recover(ctx, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Gap == nil || res.Published < len(during) {
		t.Fatalf("Recover: %+v, want the gap and at least %d rows", res, len(during))
	}
	t.Logf("recover published %d rows (%d committed during the gap), since %s", res.Published, len(during), res.Since)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", append(append([]string{}, before...), during...), 60*time.Second)
	if n := missingIDs(recs, during); n != 0 {
		t.Fatalf("%d rows of the gap missing", n)
	}
	// A second recovery has nothing to do.
	if res, err := relay.Recover(ctx, b.cfg); err != nil || res.Gap != nil {
		t.Fatalf("second Recover: %+v, %v; want nothing to do", res, err)
	}

	// The relay streams on from the new slot.
	run := b.start(t)
	after := b.insert(t, msg("e", 1), msg("e", 2))
	recs = waitForIDs(t, b.kafka.Brokers, "outbox.order", after, 60*time.Second)
	distinct, dups := distinctIDs(recs)
	t.Logf("records %d, distinct %d, duplicates %d", len(recs), distinct, dups)
	if distinct != len(before)+len(during)+len(after) {
		t.Errorf("%d distinct message IDs, want %d", distinct, len(before)+len(during)+len(after))
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gap != nil || st.State == nil {
		t.Fatalf("status after recovery: gap %+v, state %+v", st.Gap, st.State)
	}
}

// A slot dropped and re-created by someone else (at the current WAL
// position) is a gap too; Run with OnGap backfill recovers it and streams.
func TestGapSlotRecreatedBackfillOnRun(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.BackfillMargin = time.Second })
	ctx := context.Background()
	before := b.streamSome(t, 3)
	b.dropSlot(t)
	during := b.insert(t, msg("d", 1), msg("d", 2), msg("d", 3))
	if _, err := b.db.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, b.cfg.Slot); err != nil {
		t.Fatal(err)
	}
	gap := b.runGap(t)
	if gap.Reason != relaytype.GapSlotRecreated {
		t.Fatalf("gap %v, want %s", gap, relaytype.GapSlotRecreated)
	}
	b.cfg.OnGap = relay.GapBackfill
	run := b.start(t)
	after := b.insert(t, msg("e", 1))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", append(append(append([]string{}, before...), during...), after...), 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// Restarting the relay (graceful or not) is no gap: the slot is never
// ahead of the state's ceiling.
func TestNoGapAcrossRestarts(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var ids []string
	for round := range 3 {
		run := b.start(t)
		for i := range 20 {
			ids = append(ids, b.insert(t, msg(fmt.Sprintf("r%d", round), i))...)
		}
		waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
		if err := run.stop(t); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	st, err := relay.Status(context.Background(), b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Gap != nil || st.State == nil || st.State.ConfirmedCommitTime == nil {
		t.Fatalf("status: gap %+v, state %+v", st.Gap, st.State)
	}
}

// Recover refuses when pruning may have deleted rows it needs, naming
// the range, and changes nothing.
func TestRecoverRefusesPrunedRange(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	b.streamSome(t, 2)
	b.dropSlot(t)
	// What a prune on the old primary records before a failover to a
	// standby whose state trailed: rows up to now may be gone.
	var mark time.Time
	if err := b.db.Pool.QueryRow(ctx, `UPDATE pgoutbox_relay_state SET pruned_before = now() WHERE slot_name = $1 RETURNING pruned_before`,
		b.cfg.Slot).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	_, err := relay.Recover(ctx, b.cfg)
	var pe *relaytype.BackfillPrunedError
	if !errors.As(err, &pe) || !errors.Is(err, relaytype.ErrBackfillPruned) {
		t.Fatalf("Recover: %v, want a BackfillPrunedError", err)
	}
	if !pe.To.Equal(mark) || !pe.From.Before(mark) || !strings.Contains(err.Error(), mark.UTC().Format(time.RFC3339)) {
		t.Fatalf("range %s..%s, error %q; want it to end at %s", pe.From, pe.To, err, mark)
	}
	if b.slotExists(t) {
		t.Fatal("a refused recovery created the slot")
	}
}

// ownServer starts a server of the test's own (for server-wide settings
// and restarts) and returns a bundle on its postgres database.
func ownServer(t *testing.T, modify func(*relay.Config)) (*bundle, *testenv.Server) {
	t.Helper()
	return ownServerOn(t, testenv.NewKafka(t), modify)
}

// ownServerOn is ownServer on the broker k, the server started with
// settings.
func ownServerOn(t *testing.T, k *testenv.Kafka, modify func(*relay.Config), settings ...string) (*bundle, *testenv.Server) {
	t.Helper()
	srv := testenv.NewServer(t, settings...)
	pool, err := pgxpool.New(context.Background(), srv.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return setupOn(t, &testenv.DB{Name: "postgres", URL: srv.AdminURL, Pool: pool, Server: srv}, k, modify), srv
}

// insertRetry is insert that retries while the server restarts.
func (b *bundle) insertRetry(t *testing.T, m outbox.Message) []string {
	t.Helper()
	var ids []string
	testenv.WaitFor(t, time.Minute, "insert", func() (bool, error) {
		err := pgx.BeginFunc(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
			id, err := b.writer.InsertTx(context.Background(), tx, m)
			ids = []string{id.String()}
			return err
		})
		return err == nil, nil
	})
	return ids
}

// A server restart, immediate (crash-like) or fast, is no gap: PG 15
// moves the slot back to its last checkpointed position, which is a
// replay; the relay reconnects and streams on.
func TestNoGapAcrossServerRestarts(t *testing.T) {
	t.Parallel()
	b, srv := ownServer(t, nil)
	run := b.start(t)
	var ids []string
	for round, immediate := range []bool{true, false, true} {
		for i := range 30 {
			ids = append(ids, b.insertRetry(t, msg(fmt.Sprintf("r%d", round), i))...)
		}
		if err := srv.Restart(context.Background(), immediate); err != nil {
			t.Fatal(err)
		}
	}
	ids = append(ids, b.insertRetry(t, msg("last", 0))...)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 2*time.Minute)
	distinct, dups := distinctIDs(recs)
	t.Logf("3 server restarts: %d rows, %d records, %d duplicates", distinct, len(recs), dups)
	select {
	case err := <-run.done:
		t.Fatalf("Run returned across server restarts: %v", err)
	default:
	}
	if v := b.metric(t, "pgoutbox_relay_gap"); v != 0 {
		t.Fatalf("pgoutbox_relay_gap = %v", v)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A slot invalidated by max_slot_wal_keep_size (wal_status lost) while the
// relay is down is a gap; Recover delivers every row committed meanwhile.
func TestGapSlotLost(t *testing.T) {
	t.Parallel()
	b, _ := ownServer(t, func(c *relay.Config) { c.BackfillMargin = time.Second })
	ctx := context.Background()
	for _, q := range []string{`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`, `ALTER SYSTEM SET wal_keep_size = 0`, `SELECT pg_reload_conf()`} {
		if _, err := b.db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	before := b.streamSome(t, 3)
	var during []string
	for attempt := 0; ; attempt++ {
		during = append(during, b.insert(t, msg("lost", attempt))...)
		var walStatus string
		if err := b.db.Pool.QueryRow(ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&walStatus); err != nil {
			t.Fatal(err)
		}
		if walStatus == "lost" {
			break
		}
		if attempt == 20 {
			t.Fatalf("wal_status still %s", walStatus)
		}
		for _, q := range []string{`CREATE TABLE IF NOT EXISTS filler (x int)`, `INSERT INTO filler VALUES (1)`, `SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := b.db.Pool.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	gap := b.runGap(t)
	if gap.Reason != relaytype.GapSlotLost || !errors.Is(gap, relaytype.ErrSlotInvalidated) {
		t.Fatalf("gap %v, want %s wrapping ErrSlotInvalidated", gap, relaytype.GapSlotLost)
	}
	res, err := relay.Recover(ctx, b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", append(append([]string{}, before...), during...), time.Minute)
	if n := missingIDs(recs, during); n != 0 {
		t.Fatalf("%d rows committed while the slot was lost are missing", n)
	}
	t.Logf("slot lost: %d rows committed meanwhile, recover published %d, 0 missing", len(during), res.Published)
	run := b.start(t)
	after := b.insert(t, msg("after", 1))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", after, time.Minute)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}

// A standby checks the slot against the state row every retry while the
// leader streams and confirms: it must never see a gap. (Reading the state
// before the slot let it compare a ceiling older than the slot's confirmed
// position: a false gap, seen in the e2e takeover test.)
func TestStandbyChecksSeeNoFalseGap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.StatusInterval = 50 * time.Millisecond })
	b.start(t)
	standbyCfg := *b.cfg
	standbyCfg.Registerer = prometheus.NewRegistry()
	standbyCfg.StandbyRetryInterval = 5 * time.Millisecond
	standby, err := relay.New(&standbyCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- standby.Run(ctx) }()
	// Small transactions for a few seconds: the leader raises the ceiling
	// and confirms many times while the standby checks hundreds of times.
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		b.insert(t, msg(fmt.Sprint("a", i%5), i))
		select {
		case err := <-done:
			t.Fatalf("standby stopped while the leader streamed: %v", err)
		default:
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("standby Run: %v", err)
	}
}

// A recovery publishes only the rows Kafka does not hold: with a margin
// that covers every row, the rows the relay published before the gap are
// not published again (they cost one duplicate each before), the rows of
// the gap are, once; a row dead-lettered before the gap is not sent again
// either.
func TestRecoverPublishesOnlyWhatKafkaLacks(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.BackfillMargin = time.Hour })
	ctx := context.Background()
	run := b.start(t)
	before := b.insert(t, msg("b", 0), msg("b", 1), msg("b", 2), msg("b", 3), msg("b", 4))
	var badID string
	if err := b.db.Pool.QueryRow(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload, topic)
		VALUES ('order', 'b', 'e', 'bk-bad', '{}', $1) RETURNING id::text`, b.topic(relay.DefaultDeadLetterTopic)).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), before, 60*time.Second)
	testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.dlq"), 1, 30*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b.dropSlot(t)
	during := b.insert(t, msg("d", 0), msg("d", 1), msg("d", 2))
	res, err := relay.Recover(ctx, b.cfg)
	if err != nil || res.Gap == nil {
		t.Fatalf("Recover: %+v, %v", res, err)
	}
	if res.Published != len(during) || res.AlreadyHeld != len(before)+1 {
		t.Fatalf("Recover published %d rows, %d in Kafka already; want %d and %d", res.Published, res.AlreadyHeld, len(during), len(before)+1)
	}
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), append(before, during...), 60*time.Second)
	if distinct, dups := distinctIDs(recs); distinct != len(before)+len(during) || dups != 0 {
		t.Fatalf("%d distinct rows, %d duplicates; want %d, 0", distinct, dups, len(before)+len(during))
	}
	if dlq := testenv.MustReadTopic(t, b.kafka.Brokers, b.topic("outbox.dlq")); len(dlq) != 1 || header(t, dlq[0], "message-id") != badID {
		t.Fatalf("dead letters after the recovery: %+v, want the one of %s", dlq, badID)
	}
}

// A recovery skips a row only when its message ID is on the topic the row
// routes to now, or in the dead-letter topic as that row's dead letter:
// a row whose ID is only on the topic of an older routing, and one whose
// only dead letter names an older topic, are published to the topic they
// route to now. Before the fix both counted as held, because their IDs
// were somewhere in the topics the recovery read (published 0 of 2).
func TestRecoverRepublishesRowsOnlyOnAnOldTopic(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.BackfillMargin = time.Hour })
	ctx := context.Background()
	run := b.start(t)
	old, moved := b.topic("outbox.order"), b.topic("outbox.moved")
	before := b.insert(t, msg("b", 0), msg("b", 1))
	waitForIDs(t, b.kafka.Brokers, old, before, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	b.dropSlot(t)
	rows := []outbox.Message{msg("m", 0), msg("m", 1)}
	for i := range rows {
		rows[i].Topic = moved
	}
	ids := b.insert(t, rows...)
	// The first row's ID on the topic it routed to before; the second's
	// dead letter from then (original-topic: the old topic).
	dead := record(b.topic(relay.DefaultDeadLetterTopic), ids[1], rows[1], time.Now())
	dead.Headers = append(dead.Headers, kgo.RecordHeader{Key: "dlq-reason", Value: []byte(relaytype.ReasonTooLarge)},
		kgo.RecordHeader{Key: "original-topic", Value: []byte(old)})
	produce(t, b.kafka.Brokers, record(old, ids[0], rows[0], time.Now()), dead)
	res, err := relay.Recover(ctx, b.cfg)
	if err != nil || res.Gap == nil {
		t.Fatalf("Recover: %+v, %v", res, err)
	}
	if res.Published != len(ids) || res.AlreadyHeld != len(before) {
		t.Fatalf("Recover published %d rows, %d in Kafka already; want %d and %d", res.Published, res.AlreadyHeld, len(ids), len(before))
	}
	waitForIDs(t, b.kafka.Brokers, moved, ids, 60*time.Second)
}
