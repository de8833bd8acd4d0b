package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// partitionedOutbox is a time-partitioned outbox table: range on
// created_at, the primary key including the partition key (Postgres
// requires it), three monthly partitions.
var partitionedOutbox = []string{`CREATE TABLE outbox (
		id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		business_key text NOT NULL, payload jsonb NOT NULL, headers jsonb, topic text,
		created_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`,
	`CREATE TABLE outbox_2026_01 PARTITION OF outbox FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`,
	`CREATE TABLE outbox_2026_02 PARTITION OF outbox FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`,
	`CREATE TABLE outbox_2026_03 PARTITION OF outbox FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')`,
}

// seqRow is an outbox row with business key req-<seq>, so seq is commit
// order when rows are committed in seq order.
type seqRow struct {
	id        string
	seq       int
	agg       string
	createdAt *time.Time // nil: the column default
}

// insertRows commits rows, one transaction each, into table with plain
// SQL (so created_at can be set), and returns their IDs.
func insertRows(t *testing.T, pool *pgxpool.Pool, table string, rows []seqRow) []string {
	t.Helper()
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		if err := insertRow(pool, table, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.id)
	}
	return ids
}

func insertRow(pool *pgxpool.Pool, table string, r seqRow) error {
	_, err := pool.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{table}.Sanitize()+
		` (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
		VALUES ($1, 'order', $2, 'order.updated', $3, $4, coalesce($5, now()))`,
		r.id, r.agg, fmt.Sprintf("req-%d", r.seq), fmt.Sprintf(`{"seq": %d}`, r.seq), r.createdAt)
	return err
}

// newRows makes n rows from seq on, over aggs aggregates; at, when not
// nil, sets created_at.
func newRows(seq, n, aggs int, at func(i int) time.Time) []seqRow {
	rows := make([]seqRow, n)
	for i := range rows {
		rows[i] = seqRow{id: uuid.Must(uuid.NewV7()).String(), seq: seq + i, agg: fmt.Sprintf("agg-%d", (seq+i)%aggs)}
		if at != nil {
			ts := at(i)
			rows[i].createdAt = &ts
		}
	}
	return rows
}

// checkSeqOrder fails t when an aggregate's records are not in seq order
// (duplicates allowed: a later copy may repeat an earlier seq only after a
// replay, which these tests do not cause) and returns the number of
// distinct IDs.
func checkSeqOrder(t *testing.T, recs []testenv.Record) int {
	t.Helper()
	last := map[string]int{}
	seen := map[string]bool{}
	for _, r := range recs {
		id := header(t, r, "message-id")
		var seq int
		if _, err := fmt.Sscanf(header(t, r, "business-key"), "req-%d", &seq); err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[string(r.Key)]; ok && seq < prev && !seen[id] {
			t.Fatalf("aggregate %s: seq %d after %d (Kafka order differs from commit order)", r.Key, seq, prev)
		}
		last[string(r.Key)] = max(last[string(r.Key)], seq)
		seen[id] = true
	}
	return len(seen)
}

// refused runs a new relay on b.cfg, without metrics, for a start that
// must fail, and returns Run's error.
func (b *bundle) refused(t *testing.T) error {
	t.Helper()
	cfg := *b.cfg
	cfg.Registerer = nil
	r, err := relay.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.Run(ctx)
}

// A time-partitioned outbox (range on created_at, three partitions, rows
// in all of them, aggregates spread over them) arrives whole and in commit
// order per aggregate: the publication publishes it under the root's name.
func TestPartitionedOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, partitionedOutbox...)
	ctx := context.Background()
	var viaRoot bool
	if err := b.db.Pool.QueryRow(ctx, `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`, b.cfg.Publication).Scan(&viaRoot); err != nil || !viaRoot {
		t.Fatalf("publication created without publish_via_partition_root: %v %v", viaRoot, err)
	}
	b.start(t)
	months := []time.Time{
		time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC),
	}
	rows := newRows(0, 90, 7, func(i int) time.Time { return months[(i/2)%3].Add(time.Duration(i) * time.Second) })
	ids := insertRows(t, b.db.Pool, "outbox", rows)
	for _, part := range []string{"outbox_2026_01", "outbox_2026_02", "outbox_2026_03"} {
		var n int
		if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+part).Scan(&n); err != nil || n != 30 {
			t.Fatalf("%s holds %d rows (%v), want 30", part, n, err)
		}
	}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	if n := checkSeqOrder(t, recs); n != len(ids) {
		t.Fatalf("%d distinct of %d", n, len(ids))
	}
	t.Logf("%d rows over 3 partitions: 0 missing, %d records", len(ids), len(recs))
}

// An existing publication without publish_via_partition_root on a
// partitioned outbox: run refuses with the statement that fixes it, setup
// fixes it.
func TestPartitionedOutboxPublicationViaRoot(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx := context.Background()
	for _, q := range append(partitionedOutbox, `CREATE PUBLICATION p_leaves FOR TABLE outbox WITH (publish = 'insert')`) {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	k := testenv.NewKafka(t)
	cfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Slot: "s_leaves", Publication: "p_leaves", Logger: testLogger(t)}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const fix = `publication p_leaves publishes the partitions of public.outbox under their own names: ` +
		`ALTER PUBLICATION "p_leaves" SET (publish_via_partition_root = true) (or run relay setup)`
	err = r.Run(ctx)
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !relay.IsPermanent(err) || !strings.HasSuffix(err.Error(), ": "+fix) {
		t.Fatalf("run: %v", err)
	}
	if st, err := relay.Status(ctx, cfg); err != nil || st.PublicationMismatch != fix {
		t.Fatalf("status: %+v %v", st, err)
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if st, err := relay.Status(ctx, cfg); err != nil || st.PublicationMismatch != "" {
		t.Fatalf("status after setup: %+v %v", st, err)
	}
}

// Renaming the outbox table while the relay streams it: the relay follows
// it by OID and publishes every row written under the new name; a restart
// with the old name is refused; with the new name it goes on.
func TestOutboxRenameWhileStreaming(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.start(t)
	ctx := context.Background()
	ids := insertRows(t, b.db.Pool, "outbox", newRows(0, 20, 5, nil))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	if _, err := b.db.Pool.Exec(ctx, `ALTER TABLE outbox RENAME TO outbox_renamed`); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, insertRows(t, b.db.Pool, "outbox_renamed", newRows(20, 20, 5, nil))...)
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	if n := checkSeqOrder(t, recs); n != len(ids) {
		t.Fatalf("%d distinct of %d", n, len(ids))
	}
	if !run.relay.Ready() {
		t.Fatal("relay not streaming after the rename")
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// Status and restarting on the old name: a clear error, nothing
	// streamed.
	if st, err := relay.Status(ctx, b.cfg); err != nil || st.PublicationMismatch != "table public.outbox does not exist (run relay setup)" {
		t.Fatalf("status on the old name: %+v %v", st, err)
	}
	if err := b.refused(t); !errors.Is(err, relaytype.ErrTableMissing) || !relay.IsPermanent(err) {
		t.Fatalf("restart on the old name: %v", err)
	}
	b.cfg.Table = "outbox_renamed"
	b.start(t)
	ids = append(ids, insertRows(t, b.db.Pool, "outbox_renamed", newRows(40, 5, 5, nil))...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
	t.Logf("%d rows, 20 of them after the rename: 0 missing", len(ids))
}

// writer commits one-row transactions into the outbox until stopped, like
// a service does; rows whose insert failed are not counted.
type writer struct {
	t    *testing.T
	pool *pgxpool.Pool
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	ids  []string
	seq  int
}

func startWriter(t *testing.T, pool *pgxpool.Pool, seq int) *writer {
	w := &writer{t: t, pool: pool, stop: make(chan struct{}), done: make(chan struct{}), seq: seq}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			w.mu.Lock()
			r := newRows(w.seq, 1, 5, nil)[0]
			w.seq++
			w.mu.Unlock()
			if err := insertRow(pool, "outbox", r); err != nil {
				continue // the migration may make a statement fail; the row is not committed
			}
			w.mu.Lock()
			w.ids = append(w.ids, r.id)
			w.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *writer) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// committed returns the IDs committed so far.
func (w *writer) committed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}

// waitCommitted waits until the writer committed n more rows.
func (w *writer) waitCommitted(t *testing.T, n int) {
	t.Helper()
	want := len(w.committed()) + n
	testenv.WaitFor(t, 30*time.Second, "writer commits", func() (bool, error) { return len(w.committed()) >= want, nil })
}

// migrateToPartitioned replaces a live outbox by a partitioned one in one
// transaction: the old table becomes the partition of everything before
// now, a new partition takes the rest. With addToPublication the
// publication gets the new table in the same transaction.
func migrateToPartitioned(t *testing.T, pool *pgxpool.Pool, publication string, addToPublication bool) {
	t.Helper()
	steps := []string{
		`LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE`,
		`ALTER TABLE outbox RENAME TO outbox_old`,
		`CREATE TABLE outbox (LIKE outbox_old INCLUDING DEFAULTS) PARTITION BY RANGE (created_at)`,
		`ALTER TABLE outbox ADD PRIMARY KEY (id, created_at)`,
		// The partition's key must match: (id) becomes (id, created_at).
		`ALTER TABLE outbox_old DROP CONSTRAINT outbox_pkey, ADD PRIMARY KEY (id, created_at)`,
		// The cutoff is read under the lock: a row committed after the
		// transaction began (now()) but before the lock is older.
		`DO $$ DECLARE cutoff timestamptz := clock_timestamp(); BEGIN
		          EXECUTE format('ALTER TABLE outbox ATTACH PARTITION outbox_old FOR VALUES FROM (MINVALUE) TO (%L)', cutoff);
		          EXECUTE format('CREATE TABLE outbox_new PARTITION OF outbox FOR VALUES FROM (%L) TO (MAXVALUE)', cutoff); END $$`,
	}
	if addToPublication {
		steps = append(steps, `ALTER PUBLICATION `+pgx.Identifier{publication}.Sanitize()+` ADD TABLE outbox`)
	}
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, q := range steps {
			if _, err := tx.Exec(context.Background(), q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Migrating a live outbox to a partitioned table (the old table attached as
// a partition of a new partitioned outbox) with the publication changed in
// the same transaction, while a writer commits rows: the relay follows the
// new table, 0 missing. A second slot created before the migration and
// streamed only after it replays the old table's WAL (its relation is now
// a partition of the new outbox) and the new one's: 0 missing too; and so
// does a third one after the old partition was detached and dropped (the
// relation then matches by the name it had when the WAL was written).
func TestMigrateToPartitionedFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	replaySlots := []string{b.cfg.Slot + "_replay", b.cfg.Slot + "_replay_dropped"}
	for _, slot := range replaySlots {
		if _, err := b.db.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
			t.Fatal(err)
		}
	}
	run := b.start(t)
	w := startWriter(t, b.db.Pool, 0)
	w.waitCommitted(t, 30)
	migrateToPartitioned(t, b.db.Pool, b.cfg.Publication, true)
	// An INSERT that waited for the migration's lock keeps the timestamp
	// of its start, before the cutoff, and lands in the old partition:
	// count the new partition's rows, not the writer's commits.
	testenv.WaitFor(t, 30*time.Second, "30 rows in the new partition", func() (bool, error) {
		var n int
		err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox_new`).Scan(&n)
		return n >= 30, err
	})
	w.halt()
	// Rows of the old date range land in the old table, now a partition.
	old := insertRows(t, b.db.Pool, "outbox", newRows(w.seq, 10, 5, func(int) time.Time { return time.Now().Add(-time.Hour) }))
	ids := append(w.committed(), old...)
	var inOld, inNew int
	if err := b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox_old), (SELECT count(*) FROM outbox_new)`).Scan(&inOld, &inNew); err != nil {
		t.Fatal(err)
	}
	if inNew < 30 || inOld < 40 {
		t.Fatalf("rows: %d in the old partition, %d in the new one", inOld, inNew)
	}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	checkSeqOrder(t, recs)
	if !run.relay.Ready() {
		t.Fatal("relay not streaming after the migration")
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// Replay from before the migration.
	b.cfg.Slot, b.cfg.TopicTemplate = replaySlots[0], "replay.{aggregate_type}"
	run = b.start(t)
	recs = waitForIDs(t, b.kafka.Brokers, "replay.order", ids, 60*time.Second)
	checkSeqOrder(t, recs)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// And after the old partition is gone.
	if _, err := b.db.Pool.Exec(ctx, `ALTER TABLE outbox DETACH PARTITION outbox_old; DROP TABLE outbox_old`); err != nil {
		t.Fatal(err)
	}
	b.cfg.Slot, b.cfg.TopicTemplate = replaySlots[1], "replay2.{aggregate_type}"
	b.start(t)
	recs = waitForIDs(t, b.kafka.Brokers, "replay2.order", ids, 60*time.Second)
	checkSeqOrder(t, recs)
	t.Logf("%d rows (%d in the old table, %d in the new partition after the migration): 0 missing, live and on both replays", len(ids), inOld, inNew)
}

// The same migration without adding the new table to the publication: its
// rows never reach the slot. The relay stops with an error naming the
// mismatch and never confirms past the migration, so no transaction whose
// rows were dropped is confirmed.
func TestMigrateToPartitionedRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.start(t)
	before := insertRows(t, b.db.Pool, "outbox", newRows(0, 20, 5, nil))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", before, 30*time.Second)
	migrateToPartitioned(t, b.db.Pool, b.cfg.Publication, false)
	migrated := b.currentLSN(t)
	after := insertRows(t, b.db.Pool, "outbox", newRows(20, 81, 5, nil))
	err := run.wait(t, 60*time.Second)
	const want = "publication " + "%s does not include table public.outbox (the outbox table changed while the relay streamed it"
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !relay.IsPermanent(err) || !strings.Contains(err.Error(), fmt.Sprintf(want, b.cfg.Publication)) {
		t.Fatalf("run: %v", err)
	}
	if confirmed := b.confirmedFlush(t); confirmed > migrated {
		t.Fatalf("confirmed %s, past the migration at %s: the rows written after it were confirmed", confirmed, migrated)
	}
	recs := testenv.MustReadTopic(t, b.kafka.Brokers, "outbox.order")
	t.Logf("relay stopped: %v; %d of %d rows written after the migration are not in Kafka, none confirmed (confirmed %s <= %s)",
		err, missingIDs(recs, after), len(after), b.confirmedFlush(t), migrated)

	// A restart refuses too, with the same reason.
	if err := b.refused(t); !errors.Is(err, relaytype.ErrPublicationMismatch) {
		t.Fatalf("restart: %v", err)
	}

	// With the publication fixed the relay starts and publishes what is
	// written from then on; the rows written before the fix are not in the
	// stream (publication membership is decoded as of the WAL position).
	if _, err := b.db.Pool.Exec(context.Background(), `ALTER PUBLICATION `+pgx.Identifier{b.cfg.Publication}.Sanitize()+` ADD TABLE outbox`); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	later := insertRows(t, b.db.Pool, "outbox", newRows(101, 5, 5, nil))
	recs = waitForIDs(t, b.kafka.Brokers, "outbox.order", append(before, later...), 30*time.Second)
	t.Logf("after the fix: %d of %d rows written between the migration and the fix are in Kafka", len(after)-missingIDs(recs, after), len(after))
}

// A table added to the publication while the relay streams: its rows are
// dead-lettered (reason not-outbox, the row in the value), the outbox rows
// of the same transactions are published, and a restart is refused until
// the publication holds only the outbox. Under InvalidStop the relay stops
// on the first such row instead and does not confirm its transaction.
func TestForeignTableInPublication(t *testing.T) {
	t.Parallel()
	for _, policy := range []relay.InvalidPolicy{relay.InvalidDeadLetter, relay.InvalidStop} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *relay.Config) { c.OnInvalid = policy }, `CREATE TABLE other (id int PRIMARY KEY, note text)`)
			ctx := context.Background()
			run := b.start(t)
			ids := b.insert(t, msg("a", 1))
			waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
			if _, err := b.db.Pool.Exec(ctx, `ALTER PUBLICATION `+pgx.Identifier{b.cfg.Publication}.Sanitize()+` ADD TABLE other`); err != nil {
				t.Fatal(err)
			}
			var lsn pglogrepl.LSN
			err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
				id, err := b.writer.InsertTx(ctx, tx, msg("a", 2))
				ids = append(ids, id.String())
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `INSERT INTO other VALUES (1, 'x'), (2, NULL)`)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			lsn = b.currentLSN(t)
			if policy == relay.InvalidStop {
				err := run.wait(t, 60*time.Second)
				var inv *relaytype.InvalidEventError
				if !errors.As(err, &inv) || inv.Reason != relaytype.ReasonNotOutbox {
					t.Fatalf("run: %v", err)
				}
				if c := b.confirmedFlush(t); c >= lsn {
					t.Fatalf("confirmed %s, past the transaction with the foreign rows (ends before %s)", c, lsn)
				}
				return
			}
			ids = append(ids, b.insert(t, msg("a", 3))...)
			waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 30*time.Second)
			dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", 2, 30*time.Second)
			// Keyless records: their partitions, so their order, vary.
			got := []string{string(dlq[0].Value), string(dlq[1].Value)}
			slices.Sort(got)
			for i, want := range []string{`{"id":"1","note":"x"}`, `{"id":"2","note":null}`} {
				if header(t, dlq[i], "dlq-reason") != relaytype.ReasonNotOutbox || got[i] != want {
					t.Fatalf("dead letters %q %v", got, dlq[i].Headers)
				}
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
			if err := b.refused(t); !errors.Is(err, relaytype.ErrPublicationMismatch) || !strings.Contains(err.Error(), "DROP TABLE public.other") {
				t.Fatalf("restart: %v", err)
			}
		})
	}
}
