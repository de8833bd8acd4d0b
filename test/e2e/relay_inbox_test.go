package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// outcomeCounter counts the inbox consumer's delivery outcomes.
type outcomeCounter struct {
	mu sync.Mutex
	n  map[inbox.Outcome]int
}

func (c *outcomeCounter) add(_ inbox.Message, res inbox.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[res.Outcome]++
}

func (c *outcomeCounter) get(o inbox.Outcome) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[o]
}

// TestRelayToInboxEffectsOnce is the whole product end to end: writers
// commit outbox rows; the relay binary publishes them while being SIGKILLed
// (so Kafka holds duplicates of its in-flight windows), and a second relay on
// a second slot publishes every row once more (so every message is delivered
// at least twice); an inbox consumer with its own database applies each
// message's effect. The effect table, which has no unique constraint of its
// own, must hold exactly one row per committed message.
func TestRelayToInboxEffectsOnce(t *testing.T) {
	t.Parallel()
	const kills = 3
	bin := buildRelay(t)
	producerDB := testenv.NewDB(t)
	consumerDB := testenv.NewDB(t)
	kafka := testenv.NewBroker(t) // also Apache Kafka and Redpanda on CI
	ctx := context.Background()

	slots := []string{producerDB.Name + "_a", producerDB.Name + "_b"}
	args := func(cmd, slot string) []string {
		a := []string{cmd, "--database-url", producerDB.URL, "--slot", slot, "--publication", "pub_e2e"}
		if cmd == "run" {
			a = append(a, "--brokers", kafka.Brokers[0], "--metrics-addr", "", "--log-format", "json", "--status-interval", "500ms",
				"--topic-template", kafka.Topic(topicTemplate))
		}
		return a
	}
	for _, slot := range slots {
		mustRunRelay(t, bin, args("setup", slot)...)
	}

	// The consumer: its effect lands in its own database, in the inbox's
	// transaction.
	in, handler := effectInbox(t, consumerDB)
	outcomes := &outcomeCounter{n: make(map[inbox.Outcome]int)}
	var topics []string
	for _, typ := range crashAggregateTypes {
		topics = append(topics, kafka.Topic("outbox."+typ))
	}
	if kafka.Cluster == nil {
		// On Apache Kafka the inbox's kafka-go group, joining before the
		// relay's first record, would be assigned nothing for ever
		// (docs/kafka.md, a topic auto-created by a metadata request).
		kafka.CreateTopics(t, testenv.DefaultPartitions, topics...)
	}
	consumer, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:  kafka.Brokers,
		GroupID:  kafka.Topic("e2e"),
		Topics:   topics,
		Inbox:    in,
		Handler:  handler,
		OnResult: outcomes.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := testenv.Go(ctx, t, consumer.Run)

	l := newLedger()
	publishTwiceWithKills(t, bin, producerDB.Pool, slots, kills, l, args)

	// Every record in Kafka (kcat's count) must have been delivered to the
	// inbox as Processed or Duplicate.
	records := 0
	for _, topic := range topics {
		records += len(testenv.MustReadTopic(t, kafka.Brokers, topic))
	}
	testenv.WaitFor(t, 3*time.Minute, "the consumer to handle every record", func() (bool, error) {
		return outcomes.get(inbox.Processed)+outcomes.get(inbox.Duplicate) >= records, nil
	})
	if err := stopConsumer(); err != nil {
		t.Fatalf("consumer: %v", err)
	}

	// Exactly one effect per committed message, none for rolled-back ones.
	effects, _ := checkEffectsOnce(t, consumerDB, l)
	processed, duplicates := outcomes.get(inbox.Processed), outcomes.get(inbox.Duplicate)
	if processed != l.count {
		t.Errorf("%d Processed outcomes, want one per committed message (%d)", processed, l.count)
	}
	// The second slot alone delivers every message once more.
	if duplicates < l.count {
		t.Errorf("%d Duplicate outcomes, want at least %d (every message was published twice)", duplicates, l.count)
	}
	t.Logf("%d committed messages, %d Kafka records after %d kills: %d Processed, %d Duplicate; %d effects",
		l.count, records, kills, processed, duplicates, len(effects))
}
