package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// TestFailoverGapAndRecover runs the relay binary against a primary with a
// physical standby (pg_basebackup -R, streaming), through a multi-host URL
// with target_session_attrs=read-write, while a writer commits. The primary
// is killed and the standby promoted: the relay must refuse to stream over
// the gap (the slot does not exist on the new primary) and exit 1 naming
// it; relay recover then delivers every row the new primary holds (kcat,
// distinct message IDs), and relay run streams on.
func TestFailoverGapAndRecover(t *testing.T) {
	t.Parallel()
	failoverGapAndRecover(t)
}

// TestExactlyOnceFailoverGapAndRecover is TestFailoverGapAndRecover with
// relay run --exactly-once (relay recover has no mode: it publishes what
// Kafka lacks with the idempotent producer): a read_committed reader
// (kcat) finds every row, with at most 1% duplicates. The progress the old
// primary's relay committed names the old history: it is not used to skip
// anything on the new primary.
func TestExactlyOnceFailoverGapAndRecover(t *testing.T) {
	t.Parallel()
	failoverGapAndRecover(t, "--exactly-once")
}

// failoverGapAndRecover is TestFailoverGapAndRecover with mode's flags on
// relay run.
func failoverGapAndRecover(t *testing.T, mode ...string) {
	ctx := context.Background()
	bin := buildRelay(t)
	kafka := testenv.NewBroker(t)
	primary := testenv.NewServer(t)
	logPath := relayLog(t)

	mustRunRelay(t, bin, append([]string{"setup"}, failoverArgs(primary.AdminURL)...)...)
	standby, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	run := startFailoverRun(ctx, t, bin, logPath, kafka, primary, standby, mode...)
	relay, url, runArgs, pool, writerAcked, stopWriter := run.relay, run.url, run.runArgs, run.pool, run.acked, run.stopWriter

	primary.Kill()
	killedAt := writerAcked()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	// The relay reconnects to the new primary and refuses the gap.
	select {
	case <-relay.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the relay did not stop on the gap after the failover")
	}
	if code := relay.stop(time.Second); code != 1 {
		t.Fatalf("relay exit code %d after the failover, want 1", code)
	}
	logs, _ := os.ReadFile(logPath)
	var gapLines []string
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.HasPrefix(line, "relay: ") {
			gapLines = append(gapLines, line)
		}
	}
	if len(gapLines) != 1 || !strings.Contains(gapLines[0], "gap on slot failover (slot-missing)") ||
		!strings.Contains(gapLines[0], "timeline changed from 1 to 2") {
		t.Fatalf("last lines of the relay, want one gap line naming the slot and the timeline change: %q", gapLines)
	}
	t.Logf("gap line: %s", gapLines[0])
	// Writes go on on the new primary while the relay is down.
	testenv.WaitFor(t, time.Minute, "writes on the new primary", func() (bool, error) { return writerAcked() > killedAt+50, nil })

	// Same machine, short transactions: a margin of seconds covers them
	// (the default is 5m); recovery publishes what of it Kafka lacks.
	recoverArgs := append(append([]string{"recover"}, failoverArgs(url)...), "--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate),
		"--backfill-margin", "2s")
	if code, out := runRelay(t, bin, recoverArgs...); code != 0 ||
		!strings.Contains(out, "recovered a gap (slot-missing)") {
		t.Fatalf("relay recover: exit %d\n%s", code, out)
	}
	relay = startRelay(t, bin, logPath, runArgs...)
	testenv.WaitFor(t, time.Minute, "writes after the recovery", func() (bool, error) { return writerAcked() > killedAt+100, nil })
	stopWriter()

	// Every row the new primary holds is in Kafka.
	ids := outboxIDs(ctx, t, pool)
	recs := testenv.WaitForIDs(t, kafka.Brokers, kafka.Topic("outbox.order"), ids, 2*time.Minute)
	distinct := map[string]bool{}
	for _, r := range recs {
		id, _ := r.Header("message-id")
		distinct[id] = true
	}
	t.Logf("failover: %d rows on the new primary (writer saw %d commits, %d before the kill); Kafka: %d records, %d distinct, %d duplicates, %d from transactions the new primary never had",
		len(ids), writerAcked(), killedAt, len(recs), len(distinct), len(recs)-len(distinct), len(distinct)-len(ids))
	if code := relay.stop(time.Minute); code != 0 {
		t.Fatalf("relay after SIGTERM: exit code %d", code)
	}
	// Recovery publishes only what Kafka lacks: the margin costs no
	// duplicates (it cost one per row of the margin).
	if dups := len(recs) - len(distinct); dups*100 > len(ids) {
		t.Fatalf("%d duplicates for %d rows: over 1%%", dups, len(ids))
	}
}

// failoverArgs are the database flags of the failover tests' relays.
func failoverArgs(url string) []string {
	return []string{"--database-url", url, "--slot", "failover", "--publication", "pub_failover"}
}

// failoverRun is a relay binary streaming slot failover through a
// multi-host URL over a primary and its standby, with
// target_session_attrs=read-write, and a writer committing through the
// same URL (commits fail while no primary is up).
type failoverRun struct {
	url        string
	runArgs    []string // relay run's arguments
	relay      *relayProc
	pool       *pgxpool.Pool // on url, closed when the test ends
	acked      func() int    // the writer's commits
	stopWriter func()
}

// startFailoverRun starts the relay (with extra relay run flags) and the
// writer, and returns once the relay published a good part and the
// standby replayed it: 200 rows committed and in Kafka. The writer's
// progress is waited for first, so a failure tells a slow writer from a
// relay that does not publish.
func startFailoverRun(ctx context.Context, t *testing.T, bin, logPath string, kafka *testenv.Kafka, primary, standby *testenv.Server, extra ...string) *failoverRun {
	t.Helper()
	r := &failoverRun{url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		primary.Port(), standby.Port())}
	r.runArgs = append(append(append([]string{"run"}, failoverArgs(r.url)...),
		"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate), "--metrics-addr", "", "--status-interval", "200ms", "--standby-retry-interval", "200ms"),
		extra...)
	r.relay = startRelay(t, bin, logPath, r.runArgs...)
	pool, err := pgxpool.New(ctx, r.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.pool = pool
	r.acked, r.stopWriter = startOrderWriter(ctx, t, pool)
	testenv.WaitFor(t, 2*time.Minute, "the writer to commit 200 rows", func() (bool, error) { return r.acked() >= 200, nil })
	testenv.WaitForRecords(t, kafka.Brokers, kafka.Topic("outbox.order"), 200, 2*time.Minute)
	return r
}

// outboxIDs reads the IDs of the outbox rows on pool.
func outboxIDs(ctx context.Context, t *testing.T, pool *pgxpool.Pool) []string {
	return testenv.QueryStrings(ctx, t, pool, `SELECT id::text FROM outbox`)
}

// startOrderWriter commits single-row "order" transactions on pool, a few
// hundred a second, retrying while no primary accepts them, until stop.
// acked counts the commits.
func startOrderWriter(ctx context.Context, t *testing.T, pool *pgxpool.Pool) (acked func() int, stop func()) {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	stopped, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stopped:
				return
			default:
			}
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: fmt.Sprintf("a%d", i%7),
					EventType: "e", BusinessKey: fmt.Sprintf("bk-%d", i), Payload: []byte(`{}`)})
				return err
			})
			if err == nil {
				n.Add(1)
				time.Sleep(2 * time.Millisecond) // a steady few hundred a second
			} else {
				time.Sleep(20 * time.Millisecond) // no primary yet
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(stopped); <-done }) }
	t.Cleanup(stop)
	return func() int { return int(n.Load()) }, stop
}
