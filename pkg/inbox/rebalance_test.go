package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// A second member joins while the first handles a backlog slowly: the
// rebalance moves partitions only after the first member's worker finished
// its current message and committed it, so no message is delivered to both
// members (each is Processed once, none a Duplicate), no partition's
// handler runs in both at once, and no committed offset passes a message
// that was not settled (every offset below a committed one was settled,
// checked while both run). Every effect happens once, and the newcomer
// handles messages of its own.
func TestRebalanceWithSlowHandler(t *testing.T) {
	t.Parallel()
	const (
		partitions   = 4
		perPartition = 100
	)
	k, topic := newKafka(t, "rebalance", partitions)
	group := k.Topic("rebalance-group")
	b := setup(t, nil)
	var recs []rec
	for i := range partitions * perPartition {
		key := fmt.Sprintf("r-%03d", i)
		recs = append(recs, rec{Partition: i % partitions, ID: "m-" + key, Key: key, Value: `{}`})
	}
	produce(t, k.Brokers, topic, recs...)

	var (
		mu            sync.Mutex
		active        = map[int]string{} // partition -> member handling it now
		settled       = map[int]map[int64]bool{}
		handled       = map[string]int{} // member -> messages settled
		violations    []string
		secondStarted bool
	)
	member := func(name string) *inboxkafka.Config[pgx.Tx] {
		return &inboxkafka.Config[pgx.Tx]{
			Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
			SessionTimeout: 3 * time.Second, RebalanceTimeout: 20 * time.Second, BatchSize: 1, MetricsInterval: -1,
			Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
				mu.Lock()
				if other := active[msg.Partition]; other != "" && other != name {
					violations = append(violations, fmt.Sprintf("%s handles partition %d (offset %d) while %s does", name, msg.Partition, msg.Offset, other))
				}
				active[msg.Partition] = name
				// The first member is slow from the second's start until
				// the second settled a message: a revoke then always
				// finds a message being handled.
				work := 5 * time.Millisecond
				if name == "first" && secondStarted && handled["second"] == 0 {
					work = time.Second
				}
				mu.Unlock()
				time.Sleep(work) // the slow work
				defer func() {
					mu.Lock()
					delete(active, msg.Partition)
					mu.Unlock()
				}()
				return insertEffect(ctx, tx, msg)
			},
			OnResult: func(msg inbox.Message, res inbox.Result) {
				if !res.Outcome.Acked() {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if settled[msg.Partition] == nil {
					settled[msg.Partition] = map[int64]bool{}
				}
				settled[msg.Partition][msg.Offset] = true
				handled[name]++
				if res.Outcome != inbox.Processed {
					// The claim blocks a second member on a message being
					// handled and answers Duplicate; a revoke that waits and
					// commits leaves it nothing to redeliver.
					violations = append(violations, fmt.Sprintf("%s: partition %d offset %d %s: delivered to both members",
						name, msg.Partition, msg.Offset, res.Outcome))
				}
			},
		}
	}

	// Committed offsets, checked against the settled messages until the
	// test ends.
	checkCtx, stopCheck := context.WithCancel(context.Background())
	checked := make(chan int, 1)
	go func() {
		n := 0
		defer func() { checked <- n }()
		for checkCtx.Err() == nil {
			offs, err := testenv.CommittedOffsets(checkCtx, k.Brokers, group, topic, partitions)
			if err != nil {
				continue
			}
			n++
			mu.Lock()
			for p, off := range offs {
				for o := int64(0); o < off; o++ {
					if !settled[p][o] {
						violations = append(violations, fmt.Sprintf("partition %d committed at %d before offset %d was settled", p, off, o))
						break
					}
				}
			}
			mu.Unlock()
		}
	}()

	first := startConsumer(t, member("first"))
	testenv.WaitFor(t, time.Minute, "the first member settling 40 messages", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return handled["first"] >= 40, nil
	})
	mu.Lock()
	secondStarted = true
	mu.Unlock()
	second := startConsumer(t, member("second"))
	want := map[int]int64{}
	for p := range partitions {
		want[p] = perPartition
	}
	first.waitOffsets(t, want)
	stopCheck()
	if n := <-checked; n == 0 {
		t.Fatal("the committed offsets were never read")
	}
	first.stop(t)
	second.stop(t)

	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	if handled["second"] == 0 {
		t.Fatalf("the second member handled nothing (first %d): no rebalance took place", handled["first"])
	}
	for _, r := range recs {
		wantEffectOnce(t, b.db, r.Key)
	}
	t.Logf("first settled %d, second %d", handled["first"], handled["second"])
}
