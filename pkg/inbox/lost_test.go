package inbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// A member that loses its partition while a handler runs (a heartbeat
// answered UNKNOWN_MEMBER_ID: the broker dropped the member, another may
// own the partition already) commits nothing more in that generation: not
// in OnPartitionsLost, not for the message in hand when it settles, not
// later. The member rejoins, the message settled during the loss is
// redelivered from the last committed offset (a Duplicate, or handled
// again if the loss rolled its transaction back), and every effect
// happened once.
func TestConsumerCommitsNothingOnLostPartition(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "lost", 1)
	group := k.Topic("lost-group")
	fake := k.Fake(t, "injects UNKNOWN_MEMBER_ID into a heartbeat")
	b := setup(t, nil)
	produce(t, k.Brokers, topic,
		rec{ID: "m-1", Key: "k-1", Value: `{}`},
		rec{ID: "m-2", Key: "k-2", Value: `{}`},
		rec{ID: "m-3", Key: "k-3", Value: `{}`},
	)

	type commit struct {
		gen       int32
		offset    int64
		afterLoss bool
	}
	var (
		mu       sync.Mutex
		loseNext bool
		lostGen  int32 = -1
		commits  []commit
		outcomes []string
	)
	lost := make(chan struct{})
	fake.ControlKey(int16(kmsg.Heartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.HeartbeatRequest)
		mu.Lock()
		defer mu.Unlock()
		if !loseNext || req.Group != group {
			return nil, nil, false
		}
		loseNext, lostGen = false, req.Generation
		close(lost)
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.OffsetCommitRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				commits = append(commits, commit{req.Generation, rp.Offset, lostGen >= 0})
			}
		}
		return nil, nil, false
	})

	inHand, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rc := startConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		SessionTimeout: time.Second, BatchSize: 1, MetricsInterval: -1,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			if msg.ID == "m-2" {
				once.Do(func() {
					close(inHand)
					<-release // the loss happens here
				})
			}
			return insertEffect(ctx, tx, msg)
		},
		OnResult: func(msg inbox.Message, res inbox.Result) {
			mu.Lock()
			outcomes = append(outcomes, msg.ID+" "+res.Outcome.String())
			mu.Unlock()
		},
	})
	rc.waitOffsets(t, map[int]int64{0: 1})
	select {
	case <-inHand:
	case <-time.After(time.Minute):
		t.Fatal("m-2 never reached its handler")
	}
	mu.Lock()
	loseNext = true
	mu.Unlock()
	select {
	case <-lost:
	case <-time.After(time.Minute):
		t.Fatal("no heartbeat within a minute")
	}
	// OnPartitionsLost waits for the worker: let the handler end a moment
	// after the loss, settling m-2 in the database.
	time.Sleep(300 * time.Millisecond)
	close(release)
	rc.waitOffsets(t, map[int]int64{0: 3})
	rc.stop(t)

	mu.Lock()
	defer mu.Unlock()
	for _, c := range commits {
		if c.afterLoss && c.gen == lostGen {
			t.Errorf("offset %d committed in generation %d after that generation's partition was lost (commits %+v)", c.offset, c.gen, commits)
		}
	}
	if !slices.ContainsFunc(commits, func(c commit) bool { return c.afterLoss && c.gen != lostGen && c.offset == 3 }) {
		t.Errorf("no commit of offset 3 in a later generation than %d: %+v", lostGen, commits)
	}
	// m-2 was delivered twice: once to the lost member, once after the rejoin.
	if n := countPrefix(outcomes, "m-2 "); n != 2 {
		t.Errorf("m-2 had %d outcomes, want 2 (the lost member's, the redelivery's): %q", n, outcomes)
	}
	wantEffectOnce(t, b.db, "k-1", "k-2", "k-3")
	if r := readRow(t, b.db, "billing", "m-2"); r.Status != "COMPLETED" {
		t.Errorf("m-2: %+v, want COMPLETED", r)
	}
	t.Logf("outcomes %q; commits %s", outcomes, fmt.Sprint(commits))
}

// countPrefix counts the strings of ss that start with prefix.
func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}
