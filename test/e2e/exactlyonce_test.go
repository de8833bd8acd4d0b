package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// readCommitted is the kcat property of a consumer of an exactly-once
// relay (librdkafka's default, said explicitly).
const readCommitted = "isolation.level=read_committed"

// TestExactlyOnceSurvivesKills is TestCrashRestartLosesNothing in
// exactly-once mode, with 4 kills, each as the relay writes its progress
// (before it can confirm the commit that follows): a read_committed
// reader (kcat) sees every committed message exactly once, in commit
// order per aggregate.
// Each restarted relay fences the killed one's transactional ID (aborting
// the Kafka transaction it left open) and skips the WAL its committed
// progress covers. (The progress topic is the default one: its records
// are keyed by slot, and every test has a slot of its own.)
//
// Meanwhile the relay of another slot has died inside a commit: its
// transaction stays open on the progress topic, which every slot shares,
// until the kills are over. Its record is before every progress record of
// this slot's relays: a progress read that stops at the last stable
// offset found none, and a session published again what its slot did not
// confirm (1,286 duplicates in a run of the whole suite on a busy machine).
func TestExactlyOnceSurvivesKills(t *testing.T) {
	t.Parallel()
	const kills = 4
	l, kafka, slot, logPath := crashScenario(t, "pub_eos_crash", kills, openNeighbourTxn(t), true, "--exactly-once")
	keepRelayLog(t, logPath)
	records, duplicates := checkDelivered(t, kafka, l, readCommitted)
	t.Logf("%d kills; %d committed messages, %d rolled back; Kafka holds %d records (read_committed): %d duplicates",
		kills, l.count, len(l.rolledBack), records, duplicates)
	if duplicates != 0 {
		dumpDuplicates(t, kafka, []string{"outbox.order", "outbox.payment"}, slot)
		t.Fatalf("%d duplicates for a read_committed reader in exactly-once mode, want 0", duplicates)
	}
}

// openNeighbourTxn returns a crashScenario beside function that leaves a
// Kafka transaction of another slot's transactional ID open on the default
// progress topic (as a relay that died between its progress write and its
// commit does) and aborts it when released.
func openNeighbourTxn(t *testing.T) func(*testenv.Kafka) func() {
	return func(kafka *testenv.Kafka) func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		key := "pgoutbox-relay/neighbour/" + kafka.TopicPrefix
		p, err := producer.New(producer.Config{Brokers: kafka.Brokers, TransactionalID: key, TransactionTimeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.EnsureCompactedTopic(ctx, contract.DefaultProgressTopic); err != nil {
			t.Fatal(err)
		}
		if err := p.Init(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		errs, err := p.Produce(ctx, []*kgo.Record{{Topic: contract.DefaultProgressTopic, Key: []byte(key), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: contract.HeaderProgress, Value: []byte("2")}}}})
		if err == nil {
			err = errs[0]
		}
		if err != nil {
			t.Fatal(err)
		}
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Abort(ctx); err != nil {
				t.Errorf("abort the neighbour's transaction: %v", err)
			}
			p.Close()
		}
	}
}

// TestExactlyOncePausedLeaderFenced is TestPausedLeaderPublishesNothingAfterTakeover
// in exactly-once mode, the leader frozen as it commits a Kafka
// transaction (the broker drops that EndTxn): the new leader's
// InitProducerID fences the frozen one and aborts the transaction it held
// open. After SIGCONT the old leader commits nothing (it exits with the
// fenced error, or waits as a standby when its liveness guard stopped it
// first), and a read_committed reader sees every committed message
// exactly once, none of the old leader's after the new leader's.
func TestExactlyOncePausedLeaderFenced(t *testing.T) {
	t.Parallel()
	pr := pauseLeader(t, "pub_eos_paused", true, "--exactly-once")
	pr.kcatProps = []string{readCommitted}
	running := []*relayProc{pr.pb}
	testenv.WaitFor(t, time.Minute, "the old leader fenced (exited) or turned standby", func() (bool, error) {
		log := readFile(t, pr.rp.logA)
		switch {
		case pr.pa.exited():
			if !strings.Contains(log, "fenced by a newer relay of the slot") {
				return false, fmt.Errorf("old leader exited, not fenced: %v", pr.pa.err)
			}
			t.Log("the old leader exited: fenced")
			return true, nil
		case strings.Contains(log, "waiting as a standby"):
			t.Log("the old leader stepped down: waiting as a standby")
			running = append(running, pr.pa)
			return true, nil
		}
		return false, nil
	})
	if duplicates := pr.finish(t, running...); duplicates != 0 {
		t.Fatalf("%d duplicates for a read_committed reader in exactly-once mode, want 0", duplicates)
	}
}

// progressWrites watches the default progress topic from its end and
// sends on the channel it returns (without blocking) as each progress
// record of slot is written, read_uncommitted: the relay commits its
// transaction right after, and confirms the slot once that commit is
// answered. A kill at that moment finds the transaction committed, or
// aborted by the next relay, and the slot not yet confirmed past it.
func progressWrites(t *testing.T, kafka *testenv.Kafka, slot string) <-chan struct{} {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...), kgo.ConsumeTopics(contract.DefaultProgressTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := make(chan struct{}, 1)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				// pgoutbox-relay/<system>/<slot>/<incarnation>
				if strings.Contains(string(r.Key), "/"+slot+"/") {
					select {
					case c <- struct{}{}:
					default:
					}
				}
			})
		}
	}()
	return c
}
