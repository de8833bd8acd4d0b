package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// In exactly-once mode every row arrives once for a read_committed reader
// (kcat's default) across a restart of the relay.
func TestExactlyOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.ExactlyOnce = true })
	run := b.start(t)
	var ids []string
	for i := range 20 {
		ids = append(ids, b.insert(t, msg(fmt.Sprintf("agg-%d", i%3), i))...)
	}
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	b.start(t)
	var more []outbox.Message
	for i := range 10 {
		more = append(more, msg(fmt.Sprintf("agg-%d", i%3), 100+i))
	}
	ids = append(ids, b.insert(t, more...)...)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d rows", len(recs), len(ids))
	}
}

// An exactly-once relay outlives a database outage longer than its
// liveness bound: each session starts its liveness clock before it fences
// the slot's older relays, whose Kafka dials the clock guards. With the
// last session's silence on the clock, every dial was refused, for ever.
func TestExactlyOnceOutlivesOutage(t *testing.T) {
	t.Parallel()
	b, srv := ownServerOn(t, testenv.NewBroker(t), func(c *relay.Config) {
		c.ExactlyOnce = true
		c.MaxRetryBackoff = 200 * time.Millisecond
		// A liveness bound of 1 s (wal_sender_timeout / 2).
		c.DatabaseURL = testenv.WithSenderTimeout(t, c.DatabaseURL, 2*time.Second)
	})
	b.start(t)
	ids := b.insert(t, msg("agg-0", 0))
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	srv.Kill()
	time.Sleep(3 * time.Second) // the outage: three liveness bounds
	if err := srv.Restart(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, b.insertRetry(t, msg("agg-0", 1))...)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	if len(recs) != len(ids) {
		t.Fatalf("%d records for %d rows", len(recs), len(ids))
	}
}

// progressOf is the slot's history as its state row records it, and its
// progress key.
func (b *bundle) progressOf(t *testing.T) (key, systemID string, timeline int32, created string) {
	t.Helper()
	key, systemID, timeline, created, _ = progressIn(t, b.db.Pool, b.cfg.Slot)
	return key, systemID, timeline, created
}

// progressIn is the history of slot as the state row in pool's database
// records it, and its progress key.
func progressIn(t *testing.T, pool *pgxpool.Pool, slot string) (key, systemID string, timeline int32, created, incarnation string) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT system_identifier, timeline, slot_created_lsn::text, coalesce(incarnation, '')
		FROM public.pgoutbox_relay_state WHERE slot_name = $1`, slot).Scan(&systemID, &timeline, &created, &incarnation)
	if err != nil {
		t.Fatal(err)
	}
	return "pgoutbox-relay/" + systemID + "/" + slot + "/" + incarnation, systemID, timeline, created, incarnation
}

// kafkaClient is a plain client of b's broker, closed when t ends, and a
// context for its calls.
func (b *bundle) kafkaClient(t *testing.T) (context.Context, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, cl
}

// forgeProgress writes a record under the slot's progress key straight to
// Kafka (as anything with write access to the topic could).
func (b *bundle) forgeProgress(t *testing.T, value string, headers ...kgo.RecordHeader) {
	t.Helper()
	key, _, _, _ := b.progressOf(t)
	ctx, cl := b.kafkaClient(t)
	r := &kgo.Record{Topic: b.topic(contract.DefaultProgressTopic), Key: []byte(key), Value: []byte(value), Headers: headers}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Progress that no relay wrote for this history of the slot never skips a
// row: a row routed to the progress topic (keyed and shaped as the slot's
// progress) is dead-lettered as bad-topic; then a record written to the
// progress topic without the relay's header, one with it but of another
// history of the slot, and one past the server's WAL, each under the
// slot's key and each claiming the rows written while the relay was down:
// every row is published after each restart, and each is counted as
// ignored. Before the fix the relay trusted any record under its key and
// published none of them.
func TestExactlyOnceProgressCannotBeForged(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.ExactlyOnce = true })
	run := b.start(t)
	key, systemID, timeline, created, incarnation := progressIn(t, b.db.Pool, b.cfg.Slot)
	ids := b.insert(t, msg("agg-0", 0))
	forged := fmt.Sprintf(`{"slot":%q,"system_identifier":%q,"end_lsn":"FFFFFFFF/FFFFFF00"}`, b.cfg.Slot, systemID)
	var rowID string
	err := b.db.Pool.QueryRow(context.Background(), `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload, topic)
		VALUES ('order', $1, 'progress', 'bk-forged', $2, $3) RETURNING id::text`, key, forged, b.topic(contract.DefaultProgressTopic)).Scan(&rowID)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, b.insert(t, msg("agg-0", 1))...)
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.dlq"), 1, 30*time.Second)
	if header(t, dlq[0], "message-id") != rowID || header(t, dlq[0], "dlq-reason") != relaytype.ReasonBadTopic {
		t.Fatalf("dead letter %+v, want the row %s as bad-topic", dlq[0], rowID)
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	mark := kgo.RecordHeader{Key: "pgoutbox-progress", Value: []byte("2")}
	for i, attack := range []struct {
		name, reason string
		forge        func(end string)
	}{
		{"no relay header", "not-relay", func(end string) {
			b.forgeProgress(t, fmt.Sprintf(`{"slot":%q,"system_identifier":%q,"timeline":%d,"slot_created_lsn":%q,"end_lsn":%q}`,
				b.cfg.Slot, systemID, timeline, created, end))
		}},
		{"another history", "other-history", func(end string) {
			b.forgeProgress(t, fmt.Sprintf(`{"slot":%q,"system_identifier":%q,"timeline":%d,"slot_created_lsn":"0/1","incarnation":%q,"end_lsn":%q}`,
				b.cfg.Slot, systemID, timeline, incarnation, end), mark)
		}},
		{"past the WAL", "beyond-wal", func(string) {
			b.forgeProgress(t, fmt.Sprintf(`{"slot":%q,"system_identifier":%q,"timeline":%d,"slot_created_lsn":%q,"incarnation":%q,"end_lsn":"FFFFFFFF/FFFFFF00"}`,
				b.cfg.Slot, systemID, timeline, created, incarnation), mark)
		}},
	} {
		var more []outbox.Message
		for n := range 5 {
			more = append(more, msg("agg-1", 10*i+n))
		}
		ids = append(ids, b.insert(t, more...)...)
		attack.forge(b.currentLSN(t).String()) // claims the rows just written
		run := b.start(t)
		recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
		if distinct, _ := distinctIDs(recs); distinct != len(ids) {
			t.Fatalf("%s: %d of %d rows in Kafka", attack.name, distinct, len(ids))
		}
		if n := testenv.MetricValue(t, b.reg, "pgoutbox_relay_progress_ignored_total", "reason", attack.reason); n < 1 {
			t.Fatalf("%s: progress_ignored_total{reason=%s} = %v, want ≥ 1", attack.name, attack.reason, n)
		}
		if err := run.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}

// A progress topic that exists with more than one partition is refused at
// start, with a message that says how to fix it (progress is read from
// partition 0 only: the relay would skip nothing, or worse).
func TestExactlyOnceRefusesPartitionedProgressTopic(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.ExactlyOnce = true })
	ctx, cl := b.kafkaClient(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, b.topic(contract.DefaultProgressTopic)); err != nil {
		t.Fatal(err)
	}
	r := b.newRelay(t)
	err := r.Run(ctx)
	if !relay.IsPermanent(err) || !errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), "has 3 partitions, want 1") ||
		!strings.Contains(err.Error(), "--progress-topic") {
		t.Fatalf("Run: %v, want a permanent ErrConfig naming the 3 partitions and the fix", err)
	}
}

// A WAL transaction that takes longer to publish than the transaction
// timeout (a 2 s timeout; on kfake 10,000 rows in batches of 200 to a
// broker slowed to 100 ms a produce request, at least 5 s; on a real
// broker 50,000 rows in batches of 1,000) is committed in parts: every row
// arrives exactly once for a read_committed reader and the relay never
// stops, also when it is stopped between two parts and resumes inside the
// transaction. Before, the brokers aborted the one Kafka transaction, the
// epoch error stopped the relay for good, and every restart did the same.
func TestExactlyOnceLargeTransactionInParts(t *testing.T) {
	t.Parallel()
	// On kfake the produce delay makes the transaction slow: 50 requests,
	// as 50,000 rows in batches of 1,000 made, at a fifth of the rows (and
	// of the CPU). A real broker has no delay; there the rows alone must
	// outlast the timeout.
	n, batch := 10_000, 200
	if testenv.RealKafka() {
		n, batch = 50_000, 1000
	}
	b := setupAny(t, shortTxnTimeout(batch))
	if k := b.kafka.Cluster; k != nil {
		k.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			k.KeepControl()
			time.Sleep(100 * time.Millisecond)
			return nil, nil, false
		})
	}
	run := b.start(t)
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{AggregateType: "bulk", AggregateID: fmt.Sprint("a", i%100), EventType: "bulk.loaded",
			BusinessKey: fmt.Sprint(i), Payload: []byte(`{"x": 1}`)}
	}
	ids := b.insert(t, msgs...)
	// Stop between two parts: after the first committed, before the last.
	testenv.WaitFor(t, 2*time.Minute, "a part of the transaction committed", func() (bool, error) {
		recs, err := testenv.ReadTopic(context.Background(), b.kafka.Brokers, b.topic("outbox.bulk"))
		return err == nil && len(recs) > 0, nil // the topic is created by the first write
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	before, err := testenv.ReadTopic(context.Background(), b.kafka.Brokers, b.topic("outbox.bulk"))
	if err != nil {
		t.Fatal(err)
	}
	run = b.start(t)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.bulk"), ids, 3*time.Minute)
	distinct, duplicates := distinctIDs(recs)
	t.Logf("%d rows in one transaction: %d committed before the stop; %d records, %d distinct, %d duplicates (read_committed)",
		n, len(before), len(recs), distinct, duplicates)
	if distinct != n || duplicates != 0 {
		t.Fatalf("%d distinct rows, %d duplicates; want %d, 0", distinct, duplicates, n)
	}
	if len(before) == n {
		t.Log("the stop came after the last part: the resume inside the transaction was not exercised")
	}
	select {
	case err := <-run.done:
		t.Fatalf("the relay stopped: %v", err)
	default:
	}
}

// In exactly-once mode a row without a UUID message ID (a text id column)
// whose dead-letter record Kafka refuses is dead-lettered as the minimal
// record, and the rows after it are published. Refusals were remembered by
// message ID, which such a row lacks: the relay reconnected for ever and
// published nothing after it.
func TestExactlyOnceTextIDDeadLetterRefused(t *testing.T) {
	t.Parallel()
	testenv.NewBroker(t).Fake(t, "a broker whose message.max.bytes refuses the dead letter")
	b := setup(t, func(c *relay.Config) {
		c.ExactlyOnce = true
		c.Table = "public.textid"
		c.RetryBackoff, c.MaxRetryBackoff = 10*time.Millisecond, 100*time.Millisecond
	}, `CREATE TABLE textid (id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		business_key text NOT NULL, payload jsonb NOT NULL, headers jsonb, topic text, created_at timestamptz NOT NULL DEFAULT now())`)
	b.kafka = testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}))
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	b.start(t)
	insert := func(id, headers string) {
		t.Helper()
		_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO textid (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers)
			VALUES ($1, 'order', 'a', 'order.created', $1, '{}', $2::jsonb)`, id, headers)
		if err != nil {
			t.Fatal(err)
		}
	}
	before := uuid.New().String()
	insert(before, `{}`)
	// Not a UUID: dead-lettered (bad-value); the dead letter keeps the
	// headers, over the broker's limit.
	insert("order-42", fmt.Sprintf(`{"context": %q}`, strings.Repeat("c", 3500)))
	var after []string
	for range 3 {
		id := uuid.New().String()
		insert(id, `{}`)
		after = append(after, id)
	}
	waitForIDs(t, b.kafka.Brokers, "outbox.order", append([]string{before}, after...), 60*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", 1, 30*time.Second)
	// The message-id header of a row whose ID is not a UUID is the nil
	// UUID (as in at-least-once mode); the detail names the ID.
	if r := dlq[0]; len(dlq) != 1 || header(t, r, "dlq-reason") != relaytype.ReasonBadValue || r.Value != nil ||
		!strings.HasPrefix(header(t, r, "dlq-detail"), "kafka rejected the dead-letter record") || !strings.Contains(header(t, r, "dlq-detail"), `"order-42"`) {
		t.Fatalf("dead letters: %+v, want the minimal one of order-42", dlq)
	}
}

// In exactly-once mode one transient CORRUPT_MESSAGE (a record Kafka
// refuses "for its own sake" but takes on a retry) is retried, as in
// at-least-once mode, not dead-lettered at once.
func TestExactlyOnceTransientRefusalRetried(t *testing.T) {
	t.Parallel()
	testenv.NewBroker(t).Fake(t, "an injected CORRUPT_MESSAGE")
	b := setup(t, func(c *relay.Config) {
		c.ExactlyOnce = true
		c.RetryBackoff, c.MaxRetryBackoff = 10*time.Millisecond, 100*time.Millisecond
	})
	var refused atomic.Int32
	b.kafka.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		preq := req.(*kmsg.ProduceRequest)
		for _, pt := range preq.Topics {
			if pt.Topic == "outbox.order" && refused.Add(1) == 1 {
				return testenv.ProduceErrors(preq, func(string) int16 { return 2 }), nil, true // CORRUPT_MESSAGE, once
			}
		}
		b.kafka.Cluster.KeepControl()
		return nil, nil, false
	})
	b.start(t)
	ids := b.insert(t, msg("a", 1))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if refused.Load() == 0 {
		t.Fatal("the broker refused nothing")
	}
	if recs, err := testenv.ReadTopic(context.Background(), b.kafka.Brokers, "outbox.dlq"); err == nil && len(recs) > 0 {
		t.Fatalf("dead-lettered after one transient refusal: %+v", recs)
	}
}

// An exactly-once relay's progress from before a failover never skips a
// row of the new primary: the standby is stopped while the primary writes
// (so Kafka's progress runs ahead of the standby's WAL), the primary
// killed, the standby promoted, Recover run; then every row written on
// the new primary is published. Before the fix, progress of the old
// history skipped them (5 of 5 missing; at-least-once mode was right).
func TestExactlyOnceFailoverOldProgressSkipsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, primary := ownServerOn(t, testenv.NewBroker(t), func(c *relay.Config) { c.ExactlyOnce = true; c.BackfillMargin = time.Second })
	standby, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	run := b.start(t)
	ids := b.insert(t, msg("a", 0))
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	// The standby has the slot's state and the first row, then stops.
	lsn := b.currentLSN(t)
	testenv.WaitFor(t, time.Minute, "the standby to replay", func() (bool, error) {
		conn, err := pgx.Connect(ctx, standby.AdminURL)
		if err != nil {
			return false, nil
		}
		defer conn.Close(ctx)
		var replayed string
		if err := conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn()::text, '0/0')`).Scan(&replayed); err != nil {
			return false, err
		}
		got, _ := pglogrepl.ParseLSN(replayed)
		return got >= lsn, nil
	})
	standby.Kill()
	var lost []outbox.Message
	for i := range 200 {
		lost = append(lost, msg("lost", i))
	}
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), append(ids, b.insert(t, lost...)...), 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	primary.Kill()
	if err := standby.Restart(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}

	pool, err := pgxpool.New(ctx, standby.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b.db = &testenv.DB{Name: "postgres", URL: standby.AdminURL, Pool: pool, Server: standby}
	b.cfg.DatabaseURL = standby.AdminURL
	res, err := relay.Recover(ctx, b.cfg)
	if err != nil || res.Gap == nil {
		t.Fatalf("Recover: %+v, %v; want a recovered gap", res, err)
	}
	b.start(t)
	var fresh []outbox.Message
	for i := range 5 {
		fresh = append(fresh, msg("new", i))
	}
	newIDs := b.insert(t, fresh...)
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), newIDs, 60*time.Second)
	if missing := testenv.MissingIDs(recs, newIDs); missing != 0 {
		t.Fatalf("%d of %d rows of the new primary missing", missing, len(newIDs))
	}
}

// copiedAfterOneRow is an exactly-once bundle on a server of its own, and
// a copy of the server's data directory (pgserver's CopyData) taken after
// the relay published one row and stopped.
func copiedAfterOneRow(t *testing.T) (*bundle, *testenv.Server, string) {
	t.Helper()
	b, srv := ownServerOn(t, testenv.NewBroker(t), func(c *relay.Config) { c.ExactlyOnce = true })
	run := b.start(t)
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), b.insert(t, msg("a", 0)), 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	copied, err := srv.CopyData(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.db.Pool.Reset() // its connections died with the server
	return b, srv, copied
}

// fillWAL writes rows of a table outside the publication until the
// server's WAL is past lsn.
func (b *bundle) fillWAL(t *testing.T, lsn pglogrepl.LSN) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS wal_filler (x text)`); err != nil {
		t.Fatal(err)
	}
	for b.currentLSN(t) <= lsn {
		if _, err := b.db.Pool.Exec(ctx, `INSERT INTO wal_filler SELECT repeat('x', 1000) FROM generate_series(1, 100)`); err != nil {
			t.Fatal(err)
		}
	}
}

// A disk snapshot restored over the primary costs duplicates, never a
// skip. The server's data directory is copied (with the slot and its state
// row) after the relay published one row; the relay publishes 50 more,
// then the copy is put back: same system identifier, timeline and slot,
// while Kafka's progress names WAL the restored server never had. Once
// the restored server's WAL passes that progress, the 50 rows committed
// on it are all published, and the progress is counted as ignored
// (beyond-state: past what the state row records), as relay status says
// before the relay starts. Before the fix the relay trusted the progress
// and skipped every one of them (50 of 50 missing, nothing logged or
// counted).
func TestExactlyOnceRestoredSnapshotSkipsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, srv, snapshot := copiedAfterOneRow(t)
	topic := b.topic("outbox.order")
	run := b.start(t)
	// The progress of the next rows ends well past the copy's WAL.
	b.fillWAL(t, b.currentLSN(t)+64<<10)
	var later []outbox.Message
	for i := range 50 {
		later = append(later, msg("later", i))
	}
	waitForIDs(t, b.kafka.Brokers, topic, b.insert(t, later...), 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	progressEnd := b.currentLSN(t)

	if err := srv.RestoreData(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	b.db.Pool.Reset()
	var restored []outbox.Message
	for i := range 50 {
		restored = append(restored, msg("restored", i))
	}
	ids := b.insert(t, restored...)
	b.fillWAL(t, progressEnd)
	// A row past the old progress: once it is in Kafka, every row
	// committed before it is too, or was skipped.
	last := b.insert(t, msg("last", 0))
	st, err := relay.Status(ctx, b.cfg)
	if err != nil || st.Progress == nil || st.Progress.Trusted || !strings.Contains(st.Progress.Trust, "not trusted (beyond-state)") {
		t.Fatalf("Status: %+v, %v; want the progress not trusted, beyond-state", st.Progress, err)
	}
	b.start(t)
	waitForIDs(t, b.kafka.Brokers, topic, last, 60*time.Second)
	// Once last is in Kafka, every row committed before it is too, or was
	// skipped. The rows share one aggregate, so one partition, and last
	// may sit in another: Kafka writes a transaction's commit markers to
	// its partitions one after the other, so a read_committed reader can
	// see last a moment before the rows committed with it. A skipped row
	// never comes: wait for them, a bounded time (it fails with the
	// number missing).
	waitForIDs(t, b.kafka.Brokers, topic, ids, 30*time.Second)
	if n := testenv.MetricValue(t, b.reg, "pgoutbox_relay_progress_ignored_total", "reason", "beyond-state"); n < 1 {
		t.Fatalf("progress_ignored_total{reason=beyond-state} = %v, want ≥ 1", n)
	}
}

// A file-level clone of the database (same system identifier, timeline,
// slot and state row, incarnation included) relaying to the same Kafka
// under the same slot name shares neither progress nor the transactional
// ID with the original once its relay starts: the clone's relay finds the
// original's later progress past what its database records, gives its
// state row a new incarnation, publishes every row of the clone, and logs
// the other incarnation once, naming both; the original relays on under
// its own. Before incarnations both used one key: the clone's relay trusted
// the original's progress or fenced the original on every start.
func TestExactlyOnceCloneSharesNoProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, srv, copied := copiedAfterOneRow(t)
	topic := b.topic("outbox.order")
	clone, err := srv.StartCopy(ctx, copied)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clone.Stop)
	key, _, _, _, incarnation := progressIn(t, b.db.Pool, b.cfg.Slot)

	// The original relays on: its progress passes the clone's state row.
	b.start(t)
	var orig []outbox.Message
	for i := range 10 {
		orig = append(orig, msg("orig", i))
	}
	origIDs := waitForIDs(t, b.kafka.Brokers, topic, b.insert(t, orig...), 60*time.Second)

	pool, err := pgxpool.New(ctx, clone.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testenv.SyncBuffer
	cloneCfg := *b.cfg
	cloneCfg.DatabaseURL = clone.AdminURL
	cloneCfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	cb := &bundle{db: &testenv.DB{Name: "postgres", URL: clone.AdminURL, Pool: pool, Server: clone}, kafka: b.kafka, cfg: &cloneCfg, writer: b.writer}
	cb.start(t)
	var cloned []outbox.Message
	for i := range 10 {
		cloned = append(cloned, msg("clone", i))
	}
	cloneIDs := cb.insert(t, cloned...)
	waitForIDs(t, b.kafka.Brokers, topic, cloneIDs, 60*time.Second)
	cloneKey, _, _, _, cloneIncarnation := progressIn(t, pool, cloneCfg.Slot)
	if cloneIncarnation == incarnation || cloneKey == key {
		t.Fatalf("the clone's relay kept the original's incarnation %s (key %s)", incarnation, key)
	}
	// The original goes on under its own key (fenced once at most, by the
	// clone's first start).
	var more []outbox.Message
	for i := range 5 {
		more = append(more, msg("orig", 10+i))
	}
	waitForIDs(t, b.kafka.Brokers, topic, append(b.insert(t, more...), cloneIDs...), 60*time.Second)
	for _, c := range []struct {
		cfg *relay.Config
		key string
	}{{b.cfg, key}, {&cloneCfg, cloneKey}} {
		st, err := relay.Status(ctx, c.cfg)
		if err != nil || st.Progress == nil || st.Progress.Key != c.key || !st.Progress.Found || !st.Progress.Trusted {
			t.Fatalf("Status on %s: %+v, %v; want trusted progress under %s", c.cfg.DatabaseURL, st.Progress, err, c.key)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "progress of another incarnation of this system and slot"); n != 1 ||
		!strings.Contains(out, "incarnation="+cloneIncarnation) || !strings.Contains(out, "other_incarnation="+incarnation) {
		t.Fatalf("%d warnings of another incarnation naming %s and %s, want 1:\n%s", n, cloneIncarnation, incarnation, out)
	}
	t.Logf("original %d rows, clone %d rows; incarnations %s and %s", len(origIDs), len(cloneIDs), incarnation, cloneIncarnation)
}

// A state row of before incarnations (a relay upgraded over it) gets one
// at the relay's first start, and the progress of the old key is logged as
// another incarnation's ("none"), not read: the first session resumes from
// the state row.
func TestExactlyOnceUpgradeGivesIncarnation(t *testing.T) {
	t.Parallel()
	var logs testenv.SyncBuffer
	b := setupAny(t, func(c *relay.Config) {
		c.ExactlyOnce = true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `UPDATE pgoutbox_relay_state SET incarnation = NULL WHERE slot_name = $1`, b.cfg.Slot); err != nil {
		t.Fatal(err)
	}
	st, err := relay.Status(ctx, b.cfg)
	if err != nil || st.State == nil || st.State.Incarnation != "" {
		t.Fatalf("Status: %+v, %v; want a state row without an incarnation", st, err)
	}
	_, systemID, timeline, created, _ := progressIn(t, b.db.Pool, b.cfg.Slot)
	oldKey := "pgoutbox-relay/" + systemID + "/" + b.cfg.Slot
	ctx2, cl := b.kafkaClient(t)
	compact := "compact"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx2, 1, 1, map[string]*string{"cleanup.policy": &compact}, b.topic(contract.DefaultProgressTopic)); err != nil {
		t.Fatal(err)
	}
	old := &kgo.Record{Topic: b.topic(contract.DefaultProgressTopic), Key: []byte(oldKey), Headers: []kgo.RecordHeader{{Key: "pgoutbox-progress", Value: []byte("2")}},
		Value: []byte(fmt.Sprintf(`{"slot":%q,"system_identifier":%q,"timeline":%d,"slot_created_lsn":%q,"end_lsn":"0/1"}`, b.cfg.Slot, systemID, timeline, created))}
	if err := cl.ProduceSync(ctx2, old).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	ids := b.insert(t, msg("a", 0))
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 60*time.Second)
	key, _, _, _, incarnation := progressIn(t, b.db.Pool, b.cfg.Slot)
	if incarnation == "" {
		t.Fatal("the state row has no incarnation after a start")
	}
	if st, err := relay.Status(ctx, b.cfg); err != nil || st.Progress == nil || st.Progress.Key != key || !st.Progress.Found {
		t.Fatalf("Status: %+v, %v; want progress under %s", st.Progress, err, key)
	}
	if out := logs.String(); !strings.Contains(out, "other_incarnation=none") || !strings.Contains(out, "other_key="+oldKey) {
		t.Fatalf("no warning of the key of before incarnations %s:\n%s", oldKey, out)
	}
}
