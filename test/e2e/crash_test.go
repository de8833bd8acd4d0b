package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// ledger records what the writers committed: per aggregate, message IDs in
// commit order, and the IDs of rolled-back transactions.
type ledger struct {
	mu         sync.Mutex
	committed  map[string][]uuid.UUID // aggregate ID -> IDs in commit order
	rolledBack map[uuid.UUID]bool
	count      int
}

func newLedger() *ledger {
	return &ledger{committed: make(map[string][]uuid.UUID), rolledBack: make(map[uuid.UUID]bool)}
}

func (l *ledger) commit(msgs []outbox.Message, ids []uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range msgs {
		l.committed[m.AggregateID] = append(l.committed[m.AggregateID], ids[i])
	}
	l.count += len(ids)
}

// committedCount is how many messages were committed so far.
func (l *ledger) committedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func (l *ledger) rollback(ids []uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.rolledBack[id] = true
	}
}

// crashAggregateTypes route the writers' rows to these topics (template
// outbox.{aggregate_type}).
var crashAggregateTypes = []string{"order", "payment"}

// writer inserts transactions of varying size into the outbox until ctx
// ends. It owns the aggregates "w<n>-<i>", so their commit order is its
// program order.
func writer(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, n int, l *ledger) error {
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano())))
	for seq := 0; ctx.Err() == nil; seq++ {
		size := 1 + rng.IntN(8)
		switch r := rng.IntN(100); {
		case r < 8:
			size = 20 + rng.IntN(100)
		case r < 10:
			size = 300
		}
		msgs := make([]outbox.Message, size)
		for i := range msgs {
			agg := rng.IntN(100)
			msgs[i] = outbox.Message{
				AggregateType: crashAggregateTypes[agg%len(crashAggregateTypes)],
				AggregateID:   fmt.Sprintf("w%d-%d", n, agg),
				EventType:     "crash.test",
				BusinessKey:   fmt.Sprintf("w%d-%d-%d", n, seq, i),
				Payload:       fmt.Appendf(nil, `{"writer":%d,"seq":%d,"i":%d,"pad":"%x"}`, n, seq, i, rng.Uint64()),
			}
		}
		// A fresh context: a transaction cut by ctx would leave its
		// outcome unknown.
		wctx := context.WithoutCancel(ctx)
		tx, err := pool.Begin(wctx)
		if err != nil {
			return err
		}
		var ids []uuid.UUID
		if size == 1 {
			var id uuid.UUID
			id, err = w.InsertTx(wctx, tx, msgs[0])
			ids = []uuid.UUID{id}
		} else {
			ids, err = w.InsertManyTx(wctx, tx, msgs)
		}
		if err != nil {
			_ = tx.Rollback(wctx)
			return err
		}
		if rng.IntN(10) == 0 {
			if err := tx.Rollback(wctx); err != nil {
				return err
			}
			l.rollback(ids)
			continue
		}
		if err := tx.Commit(wctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		l.commit(msgs, ids)
		// Pace the writers so the test's volume stays modest on a
		// shared machine.
		time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
	return nil
}

// TestCrashRestartLosesNothing SIGKILLs the relay binary at random moments
// while writers commit continuously, restarts it each time, and checks that
// Kafka finally holds every committed message (and none rolled back), with
// per-aggregate order of first occurrences equal to commit order.
func TestCrashRestartLosesNothing(t *testing.T) {
	t.Parallel()
	const kills = 6
	l, kafka, _, _ := crashScenario(t, "pub_crash", kills, nil, false)
	records, duplicates := checkDelivered(t, kafka, l)
	t.Logf("%d kills; %d committed messages, %d rolled back; Kafka holds %d records: %d duplicates (%.2f%%), %.0f duplicates per kill",
		kills, l.count, len(l.rolledBack), records, duplicates, 100*float64(duplicates)/float64(l.count), float64(duplicates)/kills)
}

// crashScenario runs relay setup for publication, then the relay binary
// with extra flags while writers commit, SIGKILLs it kills times at
// random moments (restarting it each time), and finally lets one relay
// confirm every committed message and stop with SIGTERM. beside, when
// set, runs before the kills, and what it returns after them; with
// atCommit, each kill comes as a relay writes its progress, just before
// its commit (exactly-once mode: see progressWrites). It returns the writers' ledger, the broker, the slot and the
// relay log.
func crashScenario(t *testing.T, publication string, kills int, beside func(*testenv.Kafka) func(), atCommit bool, extra ...string) (*ledger, *testenv.Kafka, string, string) {
	t.Helper()
	bin, db, kafka, logPath := binaryEnv(t)
	slot := db.Name
	common := []string{"--database-url", db.URL, "--slot", slot, "--publication", publication}
	runArgs := append(append(append([]string{"run"}, common...),
		"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate), "--metrics-addr", "", "--log-format", "json"), extra...)

	mustRunRelay(t, bin, append([]string{"setup"}, common...)...)

	l := newLedger()
	stopWriters := startWriters(t, db.Pool, l)
	release := func() {}
	if beside != nil {
		release = beside(kafka)
	}
	var commits <-chan struct{}
	if atCommit {
		commits = progressWrites(t, kafka, slot)
	}
	killRepeatedly(t, bin, logPath, runArgs, db.Pool, slot, kills, l, commits)
	release()
	stopWriters()

	endLSN := writeFence(t, db.Pool, l)
	last := startRelay(t, bin, logPath, runArgs...)
	waitConfirmed(t, db.Pool, slot, endLSN, last)
	if code := last.stop(time.Minute); code != 0 {
		t.Fatalf("relay after SIGTERM: exit code %d, want 0", code)
	}
	return l, kafka, slot, logPath
}

// checkDelivered reads the writers' topics as kcat sees them (with the
// librdkafka properties props) and fails t unless they hold every message
// committed in l, none rolled back, and each aggregate's first
// occurrences in commit order. It returns the records read and how many
// were duplicates.
func checkDelivered(t *testing.T, kafka *testenv.Kafka, l *ledger, props ...string) (records, duplicates int) {
	t.Helper()
	seen := make(map[uuid.UUID]int)
	firsts := make(map[string][]uuid.UUID) // aggregate -> first occurrences in Kafka order
	for _, typ := range crashAggregateTypes {
		for _, rec := range mustReadTopic(t, kafka, "outbox."+typ, props...) {
			records++
			h, _ := rec.Header("message-id")
			id, err := uuid.Parse(h)
			if err != nil {
				t.Fatalf("record %s/%d@%d: message-id %q: %v", rec.Topic, rec.Partition, rec.Offset, h, err)
			}
			if seen[id]++; seen[id] == 1 {
				firsts[string(rec.Key)] = append(firsts[string(rec.Key)], id)
			}
		}
	}

	missing := 0
	for agg, ids := range l.committed {
		for _, id := range ids {
			switch n := seen[id]; {
			case n == 0:
				if missing++; missing <= 10 {
					t.Errorf("committed message %s (aggregate %s) is not in Kafka", id, agg)
				}
			case n > 1:
				duplicates += n - 1
			}
		}
		if got := firsts[agg]; missing == 0 && !slices.Equal(got, ids) {
			t.Errorf("aggregate %s: Kafka order of first occurrences differs from commit order (%d vs %d messages)", agg, len(got), len(ids))
		}
	}
	for id := range l.rolledBack {
		if seen[id] > 0 {
			t.Errorf("message %s of a rolled-back transaction is in Kafka", id)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed messages missing from Kafka", missing, l.count)
	}
	return records, duplicates
}

// mustReadTopic reads topic (under kafka's prefix) with kcat, with the
// librdkafka properties props, failing t on error.
func mustReadTopic(t *testing.T, kafka *testenv.Kafka, topic string, props ...string) []testenv.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := testenv.ReadTopicWith(ctx, kafka.Brokers, kafka.Topic(topic), props...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
