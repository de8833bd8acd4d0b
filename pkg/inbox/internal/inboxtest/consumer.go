package inboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// Loop is a consumer-loop test's fixture: the Bundle of the inbox the loop
// feeds, the broker, and the topic and consumer group the loop reads.
type Loop struct {
	*Bundle
	Kafka        *testenv.Kafka
	Topic, Group string
}

// NewLoop is Setup(t, cfg) beside NewKafka(t, topic, partitions); the group
// is named after the topic.
func NewLoop(t *testing.T, topic string, partitions int, cfg *inbox.Config) *Loop {
	t.Helper()
	k, name := NewKafka(t, topic, partitions)
	return &Loop{Bundle: Setup(t, cfg), Kafka: k, Topic: name, Group: k.Topic(topic + "-group")}
}

// Brokers are the broker's bootstrap addresses.
func (l *Loop) Brokers() []string { return l.Kafka.Brokers }

// Produce writes recs to the loop's topic (see Produce).
func (l *Loop) Produce(t *testing.T, recs ...Rec) {
	t.Helper()
	Produce(t, l.Kafka.Brokers, l.Topic, recs...)
}

// Config is the loop configuration the tests start from: the loop reads
// the topic in the group into the inbox on pgx with InsertEffect, a fetch
// held MaxWait and a one-second session.
func (l *Loop) Config() *inboxkafka.Config[pgx.Tx] {
	return &inboxkafka.Config[pgx.Tx]{Brokers: l.Kafka.Brokers, GroupID: l.Group, Topics: []string{l.Topic}, Inbox: l.In,
		MaxWait: MaxWait, SessionTimeout: time.Second, Handler: InsertEffect}
}

// Committed returns the group's committed offset per partition (see
// CommittedOffsets).
func (l *Loop) Committed(t *testing.T, partitions int) map[int]int64 {
	t.Helper()
	return CommittedOffsets(t, l.Kafka.Brokers, l.Group, l.Topic, partitions)
}

// Running is a consumer whose Run goes on in the background, or (Watch) a
// consumer process whose committed offsets a test waits for.
type Running struct {
	brokers      []string
	group, topic string
	cancel       context.CancelFunc
	done         chan error
}

// Watch returns a Running for the committed offsets of group on topic,
// for a consumer that runs elsewhere (another process).
func Watch(brokers []string, group, topic string) *Running {
	return &Running{brokers: brokers, group: group, topic: topic, cancel: func() {}, done: make(chan error)}
}

// StartConsumer starts a consumer with cfg; Stop ends it (the test's end
// cancels it too).
func StartConsumer[TTx any](t *testing.T, cfg *inboxkafka.Config[TTx]) *Running {
	t.Helper()
	c, err := inboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return Go(ctx, cancel, c, cfg)
}

// Go runs c (made with cfg) in the background with ctx, which cancel
// ends.
func Go[TTx any](ctx context.Context, cancel context.CancelFunc, c *inboxkafka.Consumer[TTx], cfg *inboxkafka.Config[TTx]) *Running {
	rc := &Running{brokers: cfg.Brokers, group: cfg.GroupID, topic: cfg.Topics[0], cancel: cancel, done: make(chan error, 1)}
	go func() { rc.done <- c.Run(ctx) }()
	return rc
}

// WaitOffsets waits until the committed offset of every partition in want
// is want's; Run returning first fails t.
func (rc *Running) WaitOffsets(t *testing.T, want map[int]int64) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("offsets %v committed", want), func() (bool, error) {
		select {
		case err := <-rc.done:
			t.Fatalf("Run stopped early: %v", err)
		default:
		}
		offs := CommittedOffsets(t, rc.brokers, rc.group, rc.topic, len(want))
		for p, off := range want {
			if offs[p] != off {
				return false, nil
			}
		}
		return true, nil
	})
}

// Stop stops the consumer gracefully and fails t unless Run returns nil.
func (rc *Running) Stop(t *testing.T) {
	t.Helper()
	rc.cancel()
	if err := <-rc.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// RunConsumer runs a consumer with cfg until every partition's committed
// offset reaches want, then stops it gracefully.
func RunConsumer[TTx any](t *testing.T, cfg *inboxkafka.Config[TTx], want map[int]int64) {
	t.Helper()
	rc := StartConsumer(t, cfg)
	rc.WaitOffsets(t, want)
	rc.Stop(t)
}
