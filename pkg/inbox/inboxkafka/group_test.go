package inboxkafka_test

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
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
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
	l := inboxtest.NewLoop(t, "rebalance", partitions, nil)
	recs := inboxtest.Spread(partitions*perPartition, partitions, "r-%03d", `{}`)
	l.Produce(t, recs...)

	var (
		mu            sync.Mutex
		active        = map[int]string{} // partition -> member handling it now
		settled       = map[int]map[int64]bool{}
		handled       = map[string]int{} // member -> messages settled
		violations    []string
		secondStarted bool
	)
	member := func(name string) *inboxkafka.Config[pgx.Tx] {
		cfg := l.Config()
		cfg.SessionTimeout, cfg.RebalanceTimeout, cfg.BatchSize, cfg.MetricsInterval = 3*time.Second, 20*time.Second, 1, -1
		cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
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
			return inboxtest.InsertEffect(ctx, tx, msg)
		}
		cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
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
		}
		return cfg
	}

	// Committed offsets, checked against the settled messages until the
	// test ends.
	checkCtx, stopCheck := context.WithCancel(context.Background())
	checked := make(chan int, 1)
	go func() {
		n := 0
		defer func() { checked <- n }()
		for checkCtx.Err() == nil {
			offs, err := testenv.CommittedOffsets(checkCtx, l.Brokers(), l.Group, l.Topic, partitions)
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

	first := inboxtest.StartConsumer(t, member("first"))
	testenv.WaitFor(t, time.Minute, "the first member settling 40 messages", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return handled["first"] >= 40, nil
	})
	mu.Lock()
	secondStarted = true
	mu.Unlock()
	second := inboxtest.StartConsumer(t, member("second"))
	want := inboxtest.EndOffsets(recs)
	first.WaitOffsets(t, want)
	stopCheck()
	if n := <-checked; n == 0 {
		t.Fatal("the committed offsets were never read")
	}
	first.Stop(t)
	second.Stop(t)

	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	if handled["second"] == 0 {
		t.Fatalf("the second member handled nothing (first %d): no rebalance took place", handled["first"])
	}
	for _, r := range recs {
		inboxtest.WantEffectOnce(t, l.DB, r.Key)
	}
	t.Logf("first settled %d, second %d", handled["first"], handled["second"])
}

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
	l := inboxtest.NewLoop(t, "lost", 1, nil)
	fake := l.Kafka.Fake(t, "injects UNKNOWN_MEMBER_ID into a heartbeat")
	l.Produce(t,
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`},
		inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{}`},
		inboxtest.Rec{ID: "m-3", Key: "k-3", Value: `{}`},
	)

	type commit struct {
		gen       int32
		offset    int64
		afterLoss bool
	}
	var (
		mu       sync.Mutex
		commits  []commit
		outcomes []string
	)
	loss := loseOnHeartbeat(fake, l.Group)
	fake.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.OffsetCommitRequest)
		lostGen := loss.generation()
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
	cfg := l.Config()
	cfg.BatchSize, cfg.MetricsInterval = 1, -1
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if msg.ID == "m-2" {
			once.Do(func() {
				close(inHand)
				<-release // the loss happens here
			})
		}
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		mu.Lock()
		outcomes = append(outcomes, msg.ID+" "+res.Outcome.String())
		mu.Unlock()
	}
	rc := inboxtest.StartConsumer(t, cfg)
	rc.WaitOffsets(t, map[int]int64{0: 1})
	select {
	case <-inHand:
	case <-time.After(time.Minute):
		t.Fatal("m-2 never reached its handler")
	}
	loss.arm(t)
	// OnPartitionsLost waits for the worker: let the handler end a moment
	// after the loss, settling m-2 in the database.
	time.Sleep(300 * time.Millisecond)
	close(release)
	rc.WaitOffsets(t, map[int]int64{0: 3})
	rc.Stop(t)

	lostGen := loss.generation()
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
	inboxtest.WantEffectOnce(t, l.DB, "k-1", "k-2", "k-3")
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-2"); r.Status != "COMPLETED" {
		t.Errorf("m-2: %+v, want COMPLETED", r)
	}
	t.Logf("outcomes %q; commits %s", outcomes, fmt.Sprint(commits))
}

// A member that loses its partition while it writes the dead letter of a
// record no inbox row deduplicates (a key the database cannot store) has
// the record redelivered after it rejoins, and dead-letters it again: two
// dead letters, the same record, one per delivery. The loss (a heartbeat
// answered UNKNOWN_MEMBER_ID, as when a starved process misses its session)
// comes while the first dead letter's write is held; the lost generation's
// offset commits are refused, as the broker refuses a member it dropped.
// The records behind it take effect once.
func TestConsumerDeadLettersAgainAfterLostPartition(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "lostdlq", 1, nil)
	fake := l.Kafka.Fake(t, "holds a dead-letter write while a heartbeat answers UNKNOWN_MEMBER_ID")
	dlq := l.Kafka.Topic("lostdlq.dlq")
	l.Produce(t,
		inboxtest.Rec{ID: "bad-nul", Key: "k-\x00-nul", Value: `{"v":"nul"}`},
		inboxtest.Rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
	)

	var (
		mu   sync.Mutex
		held bool
	)
	writing, release := make(chan struct{}), make(chan struct{})
	fake.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if !slices.ContainsFunc(req.Topics, func(rt kmsg.ProduceRequestTopic) bool { return rt.Topic == dlq }) {
			return nil, nil, false
		}
		mu.Lock()
		first := !held
		held = true
		mu.Unlock()
		if first {
			close(writing)
			fake.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	loss := loseOnHeartbeat(fake, l.Group)
	fake.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.OffsetCommitRequest)
		if req.Group != l.Group || req.Generation != loss.generation() {
			return nil, nil, false
		}
		return refusedCommit(req, kerr.UnknownMemberID.Code), nil, true
	})

	cfg := l.Config()
	cfg.DeadLetterTopic, cfg.MetricsInterval = dlq, -1
	results := resultsByOffset(cfg)
	rc := inboxtest.StartConsumer(t, cfg)
	select {
	case <-writing:
	case <-time.After(time.Minute):
		t.Fatal("no dead-letter write within a minute")
	}
	loss.arm(t)
	close(release)
	rc.WaitOffsets(t, map[int]int64{0: 2})
	rc.Stop(t)

	wantDeadLetteredAgain(t, l, dlq, results())
}

// heartbeatLoss answers one heartbeat of a group UNKNOWN_MEMBER_ID once
// armed: the broker dropped the member (its session expired), so the
// member loses its partitions and rejoins.
type heartbeatLoss struct {
	mu    sync.Mutex
	armed bool
	gen   int32 // the lost generation; -1 before the loss
	lost  chan struct{}
}

// loseOnHeartbeat installs a heartbeatLoss for group on fake.
func loseOnHeartbeat(fake *kfake.Cluster, group string) *heartbeatLoss {
	h := &heartbeatLoss{gen: -1, lost: make(chan struct{})}
	fake.ControlKey(int16(kmsg.Heartbeat), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.HeartbeatRequest)
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.armed || req.Group != group {
			return nil, nil, false
		}
		h.armed, h.gen = false, req.Generation
		close(h.lost)
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	return h
}

// arm makes the group's next heartbeat lose the member and waits for it.
func (h *heartbeatLoss) arm(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	select {
	case <-h.lost:
	case <-time.After(time.Minute):
		t.Fatal("no heartbeat within a minute")
	}
}

// generation is the generation whose member was lost, or -1.
func (h *heartbeatLoss) generation() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
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
