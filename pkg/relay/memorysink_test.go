package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/memorypub"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// setupMemory is setup with the memory sink (internal/publish/memorypub)
// instead of Kafka: no broker at all.
func setupMemory(t *testing.T, modify func(*relay.Config)) (*bundle, *memorypub.Store) {
	t.Helper()
	b := setupOn(t, testenv.NewDB(t), &testenv.Kafka{}, func(c *relay.Config) {
		c.Sink = memorypub.Name
		if modify != nil {
			modify(c)
		}
	})
	return b, memorypub.StoreOf(b.cfg.Slot)
}

// memoryIDs counts the message IDs the store holds on topic, in order of
// their first copy.
func memoryIDs(st *memorypub.Store, topic string) (first []string, copies map[string]int) {
	copies = map[string]int{}
	for _, r := range st.Records() {
		if r.Topic != topic {
			continue
		}
		id := messageID(&r)
		if copies[id] == 0 {
			first = append(first, id)
		}
		copies[id]++
	}
	return first, copies
}

// messageID is r's message-id header.
func messageID(r *publish.Record) string {
	for _, h := range r.Headers {
		if h.Key == "message-id" {
			return string(h.Value)
		}
	}
	return ""
}

// waitForMemory waits until the store holds every ID of ids on topic.
func waitForMemory(t *testing.T, st *memorypub.Store, topic string, ids []string, timeout time.Duration) map[string]int {
	t.Helper()
	var copies map[string]int
	testenv.WaitFor(t, timeout, fmt.Sprintf("%d IDs in the memory sink", len(ids)), func() (bool, error) {
		_, copies = memoryIDs(st, topic)
		for _, id := range ids {
			if copies[id] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	return copies
}

// The relay publishes through a sink that is not Kafka, chosen by name:
// the memory publisher gets every row in commit order, with the message
// contract's headers, and the slot is confirmed past it, as with Kafka.
func TestMemorySinkAtLeastOnce(t *testing.T) {
	t.Parallel()
	b, st := setupMemory(t, nil)
	run := b.start(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, b.insert(t, msg("a", 2*i), msg("b", 2*i+1))...)
	}
	copies := waitForMemory(t, st, "outbox.order", ids, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	first, _ := memoryIDs(st, "outbox.order")
	for i, id := range ids {
		if copies[id] != 1 || first[i] != id {
			t.Fatalf("record %d: %s, %d copies; want %s once, in commit order (got %v)", i, first[i], copies[id], id, first)
		}
	}
	r := st.Records()[0]
	if string(r.Key) != "a" || string(r.Value) != `{"n": 0}` || r.Timestamp.IsZero() {
		t.Fatalf("first record: key %q, value %q, timestamp %v", r.Key, r.Value, r.Timestamp)
	}
	for _, k := range []string{"message-id", "business-key", "event-type", "aggregate-type", "aggregate-id"} {
		found := false
		for _, h := range r.Headers {
			found = found || h.Key == k
		}
		if !found {
			t.Fatalf("first record: no %s header (%v)", k, r.Headers)
		}
	}
	if got, end := b.confirmedFlush(t), b.currentLSN(t); got == 0 || got > end {
		t.Fatalf("slot confirmed at %s (WAL at %s): want it past the rows", got, end)
	}
}

// A relay killed while the broker holds a write it never acknowledged
// (the write stored, its answer lost with the process) loses nothing: the
// next relay replays from the confirmed position. Four kills in a stream
// of single-row transactions: 0 missing; at-least-once, the duplicates
// are the replays; exactly-once, the killed write's transaction never
// commits and the next session resumes after the committed progress: no
// duplicate.
func TestMemorySinkKillRestartLosesNothing(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			t.Parallel()
			killRestartMemory(t, eos)
		})
	}
}

// killRestartMemory is TestMemorySinkKillRestartLosesNothing in one mode.
func killRestartMemory(t *testing.T, exactlyOnce bool) {
	b, st := setupMemory(t, func(c *relay.Config) {
		c.ShutdownTimeout = 200 * time.Millisecond
		c.ExactlyOnce = exactlyOnce
	})
	ctx, stopWriting := context.WithCancel(context.Background())
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	wg.Add(1)
	go func() { // the service: one row per transaction, all along
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			var id uuid.UUID
			err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) (err error) {
				id, err = b.writer.InsertTx(ctx, tx, msg(fmt.Sprintf("agg-%d", i%7), i))
				return err
			})
			if err != nil {
				continue // the stop, or a failure: the row is not counted
			}
			mu.Lock()
			ids = append(ids, id.String())
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	const kills = 4
	for kill := range kills {
		run := b.start(t)
		mu.Lock()
		seen := len(ids)
		mu.Unlock()
		testenv.WaitFor(t, 30*time.Second, "records after the start", func() (bool, error) {
			first, _ := memoryIDs(st, "outbox.order")
			return len(first) >= seen+20, nil
		})
		frozen := st.Freeze()
		select {
		case <-frozen:
		case <-time.After(30 * time.Second):
			t.Fatalf("kill %d: no write reached the store", kill)
		}
		// The write is stored, never answered: stopping now abandons it
		// and everything queued after it, as a kill does.
		if err := run.stop(t); err != nil {
			t.Fatalf("kill %d: Run: %v", kill, err)
		}
	}
	stopWriting()
	wg.Wait()
	run := b.start(t)
	copies := waitForMemory(t, st, "outbox.order", ids, 90*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	missing, dups := 0, 0
	for _, id := range ids {
		switch n := copies[id]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("memory sink, exactly-once %v, %d kills: %d rows, %d missing, %d duplicates", exactlyOnce, kills, len(ids), missing, dups)
	if missing != 0 || exactlyOnce && dups != 0 {
		t.Fatalf("%d of %d rows missing, %d duplicates", missing, len(ids), dups)
	}
}
