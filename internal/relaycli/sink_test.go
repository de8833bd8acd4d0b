package relaycli_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// relay run --sink nats publishes to NATS JetStream without any Kafka
// broker: every row once, in commit order, with Nats-Msg-Id.
func TestRunSinkNATS(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, append([]string{"run", "--sink", "nats", "--sink-url", n.URL, "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, f.args...)...)
	for i := range 6 {
		f.exec(t, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('order', $1, 'created', $2, '{}')`,
			fmt.Sprintf("a%d", i%2), fmt.Sprintf("bk-%d", i))
	}
	testenv.WaitFor(t, 60*time.Second, "six messages in the stream", func() (bool, error) {
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs >= 6, nil
	})
	r.stop(t)
	for seq := uint64(1); seq <= 6; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("business-key") != fmt.Sprintf("bk-%d", seq-1) || m.Header.Get(jetstream.MsgIDHeader) != m.Header.Get("message-id") {
			t.Fatalf("message %d: %v", seq, m.Header)
		}
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.Msgs != 6 {
		t.Fatalf("stream: %+v, %v; want 6 messages", info.State, err)
	}
}
