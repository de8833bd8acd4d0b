package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// TestRelayNATSAtomicBatchesAcrossKills is TestRelayToInboxOverNATS's
// publishing on a stream that takes atomic batches: the relay binary
// SIGKILLed four times on one slot while another slot publishes every row
// once more. Replayed batches hold message IDs the stream has, so the
// server refuses them and the relay writes them record by record: the
// stream ends with every committed row exactly once, each in commit order
// per aggregate, and holds batches (messages with a batch ID).
func TestRelayNATSAtomicBatchesAcrossKills(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	db := testenv.NewDB(t)
	n := testenv.NewNATS(t)
	ctx := context.Background()
	stream, err := n.JetStream(t).CreateStream(ctx, jetstream.StreamConfig{
		Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 10 * time.Minute, AllowAtomicPublish: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	slots := []string{db.Name + "_a", db.Name + "_b"}
	args := func(cmd, slot string) []string {
		a := []string{cmd, "--database-url", db.URL, "--slot", slot, "--publication", "pub_e2e"}
		if cmd == "run" {
			a = append(a, "--sink", "nats", "--sink-url", n.URL, "--metrics-addr", "", "--log-format", "json", "--status-interval", "500ms")
		}
		return a
	}
	for _, slot := range slots {
		mustRunRelay(t, bin, args("setup", slot)...)
	}
	l := newLedger()
	publishTwiceWithKills(t, bin, db.Pool, slots, 4, l, args)

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byAggregate := map[string][]string{}
	seen, batched := map[string]int{}, 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get("message-id")
		if seen[id]++; seen[id] == 1 {
			byAggregate[m.Header.Get("aggregate-id")] = append(byAggregate[m.Header.Get("aggregate-id")], id)
		}
		if m.Header.Get("Nats-Batch-Id") != "" {
			batched++
		}
	}
	missing, dups := 0, 0
	for agg, ids := range l.committed {
		got := byAggregate[agg]
		for i, id := range ids {
			switch {
			case seen[id.String()] == 0:
				missing++
			case i < len(got) && got[i] != id.String():
				t.Errorf("aggregate %s: message %d is %s, want %s (commit order)", agg, i, got[i], id)
			}
			dups += max(seen[id.String()]-1, 0)
		}
	}
	t.Logf("committed %d, stored %d (%d in batches), missing %d, duplicates %d", l.count, info.State.Msgs, batched, missing, dups)
	if missing != 0 || dups != 0 || int(info.State.Msgs) != l.count || batched == 0 {
		t.Fatalf("committed %d, stored %d: %d missing, %d duplicates, %d in batches; want each once, batches used", l.count, info.State.Msgs, missing, dups, batched)
	}
}
