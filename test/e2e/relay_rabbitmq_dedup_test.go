package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// TestRelayRabbitMQNoDuplicatesAcrossKills runs relay run --sink rabbitmq
// on one slot while writers commit rows and the relay is SIGKILLed four
// times, then drains the slot. Every restart replays from the slot's
// confirmed position, so the relay writes rows again; the stream drops
// them, because the relay names its producer after the slot's WAL history
// (publish.Session.Slot) and derives publishing IDs from WAL positions.
// The streams, read by message ID, hold every committed row once.
func TestRelayRabbitMQNoDuplicatesAcrossKills(t *testing.T) {
	t.Parallel()
	const kills = 4
	bin := buildRelay(t)
	db := testenv.NewDB(t)
	r, prefix, streams := rabbitMQStreams(t, "dedup")
	slot := db.Name + "_rmq"
	args := rabbitMQRelayArgs(db.URL, r.StreamURI, prefix)
	mustRunRelay(t, bin, args("setup", slot)...)
	runArgs := args("run", slot)

	l := newLedger()
	logPath := relayLog(t)
	stopWriters := startWriters(t, db.Pool, l)
	killRepeatedly(t, bin, logPath, runArgs, db.Pool, slot, kills, l, nil)
	stopWriters()
	endLSN := writeFence(t, db.Pool, l)
	last := startRelay(t, bin, logPath, runArgs...)
	waitConfirmed(t, db.Pool, slot, endLSN, last)
	if code := last.stop(30 * time.Second); code != 0 {
		t.Errorf("relay run exited %d", code)
	}

	held := map[string]int{}
	var stored int
	for _, s := range streams[:len(crashAggregateTypes)] {
		for _, m := range r.ReadStream(t, s) {
			id, _ := m.ApplicationProperties["message-id"].(string)
			held[id]++
			stored++
		}
	}
	missing, duplicates := heldOnce(l, held)
	t.Logf("RabbitMQ, one slot, %d kills: %d committed, %d stored, %d missing, %d duplicates",
		kills, l.count, stored, missing, duplicates)
	if missing != 0 || duplicates != 0 || stored != l.count {
		t.Errorf("%d missing, %d duplicates, %d stored for %d committed: want every row once", missing, duplicates, stored, l.count)
	}
}

// rabbitMQStreams declares, on the shared RabbitMQ node, a stream per
// crash aggregate type and a dead-letter stream under a new prefix (name
// and a timestamp), deleted at t's end: the node, the prefix and the
// streams, the dead-letter one last.
func rabbitMQStreams(t *testing.T, name string) (*testenv.RabbitMQ, string, []string) {
	t.Helper()
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	prefix := fmt.Sprintf("%s%d", name, time.Now().UnixNano())
	var streams []string
	for _, typ := range append(crashAggregateTypes, "dlq") {
		s := prefix + "." + typ
		if err := env.DeclareStream(s, &stream.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.DeleteStream(s) })
		streams = append(streams, s)
	}
	return r, prefix, streams
}

// rabbitMQRelayArgs gives the relay binary's arguments of a command for a
// slot of the database at dbURL: run publishes to the streams under
// prefix of the RabbitMQ node at uri.
func rabbitMQRelayArgs(dbURL, uri, prefix string) func(cmd, slot string) []string {
	return func(cmd, slot string) []string {
		a := []string{cmd, "--database-url", dbURL, "--slot", slot, "--publication", "pub_e2e"}
		if cmd == "run" {
			a = append(a, "--sink", "rabbitmq", "--sink-url", uri, "--topic-template", prefix+".{aggregate_type}",
				"--metrics-addr", "", "--log-format", "json", "--status-interval", "500ms")
		}
		return a
	}
}

// heldOnce compares the committed messages of l with held, the copies a
// broker holds by message ID: how many are missing, and how many copies
// beyond the first it holds.
func heldOnce(l *ledger, held map[string]int) (missing, duplicates int) {
	for _, id := range committedIDs(l) {
		switch n := held[id.String()]; {
		case n == 0:
			missing++
		case n > 1:
			duplicates += n - 1
		}
	}
	return missing, duplicates
}
