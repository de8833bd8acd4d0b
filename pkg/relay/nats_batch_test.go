package relay_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// To a stream that takes atomic batches, the relay publishes each write
// as an atomic batch: every row once, in commit order, each message
// stored under a batch ID.
func TestNATSSinkAtomicBatches(t *testing.T) {
	t.Parallel()
	n, s, b := natsSinkSetup(t, nil)
	if _, err := n.JetStream(t).UpdateStream(t.Context(), jetstream.StreamConfig{
		Name: "OUTBOX", Subjects: []string{"outbox.>"}, AllowAtomicPublish: true,
	}); err != nil {
		t.Fatal(err)
	}
	ids := natsSinkRows(t, b, s)
	got, msgs := natsIDs(t, s, "outbox.order.")
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("stream holds %v, want %v once each, in order", got, ids)
	}
	for i, m := range msgs {
		if m.Header.Get("Nats-Batch-Id") == "" {
			t.Fatalf("message %d (%s) stored outside a batch: %v", i, got[i], m.Header)
		}
	}
}
