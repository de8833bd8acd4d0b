package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxnats"
)

// TestRelayToInboxOverNATS is TestRelayToInboxEffectsOnce on NATS
// JetStream (relay run --sink nats): the relay binary publishes while
// SIGKILLed four times and a second relay on a second slot publishes every
// row once more, yet within the stream's duplicate window JetStream stores
// each message ID once (Nats-Msg-Id); an inboxnats consumer applies each
// message's effect exactly once.
func TestRelayToInboxOverNATS(t *testing.T) {
	t.Parallel()
	const kills = 4
	bin := buildRelay(t)
	producerDB := testenv.NewDB(t)
	consumerDB := testenv.NewDB(t)
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	ctx := context.Background()
	// A window far longer than the test: every replay falls inside it.
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	slots := []string{producerDB.Name + "_a", producerDB.Name + "_b"}
	args := func(cmd, slot string) []string {
		a := []string{cmd, "--database-url", producerDB.URL, "--slot", slot, "--publication", "pub_e2e"}
		if cmd == "run" {
			a = append(a, "--sink", "nats", "--sink-url", n.URL, "--metrics-addr", "", "--log-format", "json", "--status-interval", "500ms")
		}
		return a
	}
	for _, slot := range slots {
		mustRunRelay(t, bin, args("setup", slot)...)
	}

	in, handler := effectInbox(t, consumerDB)
	outcomes := &outcomeCounter{n: make(map[inbox.Outcome]int)}
	consumer, err := inboxnats.New(&inboxnats.Config[pgx.Tx]{
		URL: n.URL, Stream: "OUTBOX", Durable: "e2e", Inbox: in,
		Handler:  handler,
		OnResult: outcomes.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := testenv.Go(ctx, t, consumer.Run)

	l := newLedger()
	publishTwiceWithKills(t, bin, producerDB.Pool, slots, kills, l, args)

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := int(info.State.Msgs)
	testenv.WaitFor(t, 3*time.Minute, "the consumer to handle every message", func() (bool, error) {
		return outcomes.get(inbox.Processed)+outcomes.get(inbox.Duplicate) >= stored, nil
	})
	if err := stopConsumer(); err != nil {
		t.Fatalf("consumer: %v", err)
	}

	effects, missing := checkEffectsOnce(t, consumerDB, l)
	// Two slots and four kills published every message at least twice;
	// the stream's duplicate window kept one copy of each.
	if stored != l.count {
		t.Errorf("the stream holds %d messages for %d committed rows: want one copy each within the duplicate window", stored, l.count)
	}
	t.Logf("NATS: %d committed messages after %d kills and a second slot: %d stored (%d duplicates), %d missing; %d Processed, %d Duplicate; %d effects",
		l.count, kills, stored, stored-l.count, missing, outcomes.get(inbox.Processed), outcomes.get(inbox.Duplicate), len(effects))
}
