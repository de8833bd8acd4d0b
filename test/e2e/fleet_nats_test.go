package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// TestFleetNATSSourceBesideKafka runs one fleet file of two sources in
// one relay process: one publishing to Kafka (the default sink), the other
// to NATS JetStream (sink: nats, its URL from sink-url-file:). Writers
// commit into both databases; Kafka then holds every row of the first,
// in commit order per aggregate, and the JetStream stream every row of
// the second, once each (Nats-Msg-Id), and nothing of the other source.
func TestFleetNATSSourceBesideKafka(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	kafka := testenv.NewBroker(t)
	n := testenv.NewNATS(t)
	stream, err := n.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	urlFile := testenv.TempFile(t, "nats.url", n.URL+"\n")
	dbs := []*testenv.DB{testenv.NewDB(t), testenv.NewDB(t)}
	for _, db := range dbs {
		mustRunRelay(t, bin, "setup", "--database-url", db.URL, "--slot", db.Name, "--publication", "pub_fleet")
	}
	file := fmt.Sprintf(`defaults:
  brokers: [%s]
  publication: pub_fleet
sources:
  - name: to-kafka
    database-url: %s
    slot: %s
    topic-template: %s
  - name: to-nats
    database-url: %s
    slot: %s
    sink: nats
    sink-url-file: %s
`, kafka.Brokers[0], dbs[0].URL, dbs[0].Name, kafka.Topic(topicTemplate), dbs[1].URL, dbs[1].Name, urlFile)
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := startRelay(t, bin, relayLog(t), "run", "--config", path, "--metrics-addr", "", "--log-format", "json")

	toKafka, toNATS := newLedger(), newLedger()
	stops := []func(){startWritersFrom(t, dbs[0].Pool, 0, toKafka), startWritersFrom(t, dbs[1].Pool, 2, toNATS)}
	time.Sleep(2 * time.Second)
	for _, stop := range stops {
		stop()
	}
	waitConfirmed(t, dbs[0].Pool, dbs[0].Name, writeFence(t, dbs[0].Pool, toKafka), proc)
	waitConfirmed(t, dbs[1].Pool, dbs[1].Name, writeFence(t, dbs[1].Pool, toNATS), proc)
	if code := proc.stop(time.Minute); code != 0 {
		t.Fatalf("relay run --config after SIGTERM: exit code %d, want 0", code)
	}

	records, duplicates := checkDelivered(t, kafka, toKafka)
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		held[m.Header.Get("message-id")]++
	}
	missing, natsDuplicates := heldOnce(toNATS, held)
	t.Logf("Kafka source: %d committed, %d records, %d duplicates; NATS source: %d committed, %d stored, %d missing, %d duplicates",
		toKafka.count, records, duplicates, toNATS.count, info.State.Msgs, missing, natsDuplicates)
	if missing != 0 || natsDuplicates != 0 || int(info.State.Msgs) != toNATS.count {
		t.Errorf("NATS stream: %d missing, %d duplicates, %d stored for %d committed: want each row of the NATS source once",
			missing, natsDuplicates, info.State.Msgs, toNATS.count)
	}
}
