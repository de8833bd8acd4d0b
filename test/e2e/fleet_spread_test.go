package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// pacedWriter commits one single-row transaction into pool every period
// until ctx ends, recording each in l; aggregates "w<n>-<i>" are its own.
// While paused it writes nothing (its database is unreachable on purpose).
func pacedWriter(ctx context.Context, pool *pgxpool.Pool, n int, period time.Duration, paused *atomic.Bool, l *ledger) error {
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		return err
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if paused.Load() {
			continue
		}
		msg := outbox.Message{
			AggregateType: crashAggregateTypes[seq%len(crashAggregateTypes)],
			AggregateID:   fmt.Sprintf("w%d-%d", n, seq%10),
			EventType:     "fleet.test",
			BusinessKey:   fmt.Sprintf("w%d-%d", n, seq),
			Payload:       fmt.Appendf(nil, `{"writer":%d,"seq":%d}`, n, seq),
		}
		var id uuid.UUID
		wctx := context.WithoutCancel(ctx)
		err := pgx.BeginFunc(wctx, pool, func(tx pgx.Tx) error {
			var err error
			id, err = w.InsertTx(wctx, tx, msg)
			return err
		})
		if err != nil {
			if paused.Load() {
				continue // cut by the outage: not committed
			}
			return err
		}
		l.commit([]outbox.Message{msg}, []uuid.UUID{id})
	}
}

// TestFleetTwentySourcesThreeReplicas runs one fleet file of 20 sources
// (databases of one server) on three relay processes that spread them,
// with a writer per source. It checks the spread (no replica leads more
// than ceil(20/3) = 7), then SIGKILLs one replica and SIGSTOPs another:
// the third leads all 20. One database refuses connections for 10 s
// meanwhile: the others keep publishing. After SIGCONT the frozen replica
// gets its share back. Kafka finally holds every committed row, in commit
// order per aggregate.
func TestFleetTwentySourcesThreeReplicas(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	kafka := testenv.NewBroker(t)
	const sources, replicas, maxLed = 20, 3, 7
	head := fmt.Sprintf("spread:\n  group: %s\n  session-timeout: 6s\ndefaults:\n  brokers: [%s]\n  topic-template: %s\n  standby-retry-interval: 200ms\nsources:\n",
		kafka.Topic(fmt.Sprintf("fleet-twenty-%d", os.Getpid())), kafka.Brokers[0], kafka.Topic(topicTemplate))
	// A frozen replica's walsenders end after 2s, freeing its slots.
	path, dbs := writeFleetFile(t, bin, head, sources, func(db *testenv.DB) string { return testenv.WithSenderTimeout(t, db.URL, 2*time.Second) })
	addrs := make([]string, replicas)
	procs := make([]*relayProc, replicas)
	for i := range procs {
		addrs[i] = freeAddr(t)
		procs[i] = startRelay(t, bin, relayLog(t), "run", "--config", path, "--metrics-addr", addrs[i], "--log-format", "json", "--instance-id", fmt.Sprintf("r%d", i))
	}
	spread := func(live []int, most int) func() (bool, error) {
		return func() (bool, error) {
			for _, i := range live {
				if procs[i].exited() {
					return false, fmt.Errorf("replica %d exited: %v", i, procs[i].err)
				}
			}
			leaders := fleetLeaders(addrs) // a stopped replica does not answer
			for _, rs := range leaders {
				if len(rs) != 1 {
					return false, nil
				}
			}
			for _, i := range live {
				if n := count(leaders, i); n < 1 || n > most {
					return false, nil
				}
			}
			return len(leaders) == sources, nil
		}
	}
	testenv.WaitFor(t, 2*time.Minute, fmt.Sprintf("20 sources each streamed once, at most %d per replica", maxLed), spread([]int{0, 1, 2}, maxLed))
	leaders := fleetLeaders(addrs)
	t.Logf("spread over 3 replicas: %d, %d, %d sources", count(leaders, 0), count(leaders, 1), count(leaders, 2))

	l := newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, sources)
	paused := make([]atomic.Bool, sources)
	for i, db := range dbs {
		wg.Go(func() { errs[i] = pacedWriter(ctx, db.Pool, i, 25*time.Millisecond, &paused[i], l) })
	}
	stopWriters := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stopWriters)
	time.Sleep(2 * time.Second)

	killed, frozen, survivor := 0, 1, 2
	procs[killed].kill()
	if err := procs[frozen].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = procs[frozen].cmd.Process.Signal(syscall.SIGCONT) })
	began := time.Now()

	// One database refuses connections for 10 s meanwhile.
	outage := dbs[sources-1]
	admin := testenv.NewDB(t).Pool // a pool on the same server
	paused[sources-1].Store(true)
	if _, err := admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{outage.Name}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, outage.Name); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, "the third replica streaming the 19 reachable sources", func() (bool, error) {
		if procs[survivor].exited() {
			return false, fmt.Errorf("survivor exited: %v", procs[survivor].err)
		}
		return count(fleetLeaders(addrs[survivor:survivor+1]), 0) >= sources-1, nil
	})
	t.Logf("SIGKILL of one replica, SIGSTOP of another: the third streamed the 19 reachable sources %s later", time.Since(began).Round(100*time.Millisecond))
	before := l.committedCount()
	time.Sleep(3 * time.Second)
	if l.committedCount() <= before {
		t.Fatalf("no row committed into the 19 reachable sources during the outage")
	}
	if time.Since(began) < 10*time.Second {
		time.Sleep(10*time.Second - time.Since(began))
	}
	if _, err := admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{outage.Name}.Sanitize()+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	paused[sources-1].Store(false)
	testenv.WaitFor(t, 2*time.Minute, "every source streamed again, the database back", func() (bool, error) {
		return count(fleetLeaders(addrs[survivor:survivor+1]), 0) == sources, nil
	})

	if err := procs[frozen].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 3*time.Minute, "the thawed replica back with its share (at most 10 each)", spread([]int{frozen, survivor}, sources/2))
	time.Sleep(time.Second)
	stopWriters()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	for _, db := range dbs { // one at a time: the fences share an aggregate
		waitConfirmed(t, db.Pool, db.Name, writeFence(t, db.Pool, l), procs[frozen], procs[survivor])
	}
	for _, i := range []int{frozen, survivor} {
		if code := procs[i].stop(time.Minute); code != 0 {
			t.Fatalf("replica %d after SIGTERM: exit code %d, want 0", i, code)
		}
	}
	records, duplicates := checkDelivered(t, kafka, l)
	t.Logf("%d committed rows over %d sources; Kafka holds %d records: %d duplicates", l.count, sources, records, duplicates)

	// No stale copy from the frozen replica: nothing it had produced
	// before SIGSTOP is appended after a record of the same source another
	// replica produced since (the relay's write guard refuses writes once
	// its replication connection is stale). Per source: the sources share
	// topics, and a write of the frozen replica that left before SIGSTOP
	// may be appended after the survivor's record of another source.
	frozenID := fmt.Sprintf("r%d", frozen)
	stale := 0
	for _, typ := range crashAggregateTypes {
		type place struct {
			partition int32
			source    string // the writer's prefix of the aggregate ID (key), "w3" of "w3-7"
		}
		newer := map[place]bool{} // a record of the takeover seen
		for _, rec := range mustReadTopic(t, kafka, "outbox."+typ) {
			// relay-instance is REPLICA/SOURCE in a fleet.
			header, _ := rec.Header("relay-instance")
			inst, _, _ := strings.Cut(header, "/")
			source, _, _ := strings.Cut(string(rec.Key), "-")
			at := place{rec.Partition, source}
			switch {
			case inst != frozenID && rec.Timestamp.After(began):
				newer[at] = true
			case inst == frozenID && rec.Timestamp.Before(began) && newer[at]:
				stale++
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d records the frozen replica produced before SIGSTOP were appended after the takeover", stale)
	}
}
