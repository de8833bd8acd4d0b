package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// With FenceWrites an at-least-once relay writes in Kafka transactions of
// the slot's key: a producer initialised under that key (as a successor
// relay would be) fences it; its write then fails, aborted, the session
// ends, and the next session initialises again and publishes on. A
// read_committed reader sees every row once: the fenced write's records
// were aborted.
func TestFenceWritesFencesTheRelayOfTheSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.FenceWrites = true })
	b.start(t)
	ids := b.insert(t, msg("f", 0), msg("f", 1))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txns, err := kadm.NewClient(cl).ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, tx := range txns.Sorted() {
		if strings.HasPrefix(tx.TxnID, "pgoutbox-relay/") && strings.Contains(tx.TxnID, "/"+b.cfg.Slot+"/") {
			key = tx.TxnID
		}
	}
	if key == "" {
		t.Fatalf("no transactional ID of slot %s among %+v", b.cfg.Slot, txns.Sorted())
	}
	successor, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Brokers...), kgo.TransactionalID(key))
	if err != nil {
		t.Fatal(err)
	}
	defer successor.Close()
	if _, _, err := successor.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	more := b.insert(t, msg("f", 2), msg("f", 3))
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", append(ids, more...), 60*time.Second)
	if distinct, dups := distinctIDs(recs); distinct != 4 || dups != 0 {
		t.Fatalf("%d distinct rows, %d duplicates; want 4, 0", distinct, dups)
	}
	if n := b.metric(t, "pgoutbox_relay_reconnects_total"); n < 1 {
		t.Fatalf("reconnects %v: want the fenced session ended and a new one", n)
	}
}
