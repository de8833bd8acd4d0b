package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxrabbitmq"
)

// TestRelayToInboxOverRabbitMQ is TestRelayToInboxEffectsOnce on RabbitMQ
// streams (relay run --sink rabbitmq): the relay binary publishes while
// SIGKILLed four times and a second relay on a second slot publishes every
// row once more. The relay names its producer after its slot, so the
// stream drops a slot's replays, but the second slot's copies come from
// another producer and are stored; one inboxrabbitmq loop per stream
// applies each message's effect exactly once.
func TestRelayToInboxOverRabbitMQ(t *testing.T) {
	t.Parallel()
	const kills = 4
	bin := buildRelay(t)
	producerDB := testenv.NewDB(t)
	consumerDB := testenv.NewDB(t)
	ctx := context.Background()
	r, prefix, streams := rabbitMQStreams(t, "e2e")

	slots := []string{producerDB.Name + "_a", producerDB.Name + "_b"}
	args := rabbitMQRelayArgs(producerDB.URL, r.StreamURI, prefix)
	for _, slot := range slots {
		mustRunRelay(t, bin, args("setup", slot)...)
	}

	in, handler := effectInbox(t, consumerDB)
	outcomes := &outcomeCounter{n: make(map[inbox.Outcome]int)}
	var stops []func() error
	for _, s := range streams[:len(crashAggregateTypes)] {
		consumer, err := inboxrabbitmq.New(&inboxrabbitmq.Config[pgx.Tx]{URI: r.StreamURI, Stream: s, Name: "e2e", Inbox: in,
			Handler: handler, OnResult: outcomes.add, DeadLetterStream: prefix + ".dlq"})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, testenv.Go(ctx, t, consumer.Run))
	}

	l := newLedger()
	publishTwiceWithKills(t, bin, producerDB.Pool, slots, kills, l, args)

	testenv.WaitFor(t, 3*time.Minute, "the consumers to process every committed message", func() (bool, error) {
		return outcomes.get(inbox.Processed) >= l.count, nil
	})
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Fatalf("consumer: %v", err)
		}
	}
	effects, missing := checkEffectsOnce(t, consumerDB, l)
	if processed := outcomes.get(inbox.Processed); processed != l.count {
		t.Errorf("%d Processed outcomes, want one per committed message (%d)", processed, l.count)
	}
	t.Logf("RabbitMQ: %d committed messages after %d kills and a second slot: %d missing; %d Processed, %d Duplicate (by the stop); %d effects",
		l.count, kills, missing, outcomes.get(inbox.Processed), outcomes.get(inbox.Duplicate), len(effects))
}
