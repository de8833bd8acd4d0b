package relaycli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// relayToNATS creates the stream OUTBOX (outbox.>) with js and runs relay
// run with args (and f's, metrics on a free port, JSON logs) while n rows
// are committed, until the stream holds them; it returns the stream and
// the stopped relay's run.
func relayToNATS(t *testing.T, f *fixture, js jetstream.JetStream, n int, args ...string) (jetstream.Stream, *running) {
	t.Helper()
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, append(append([]string{"run", "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, args...), f.args...)...)
	for i := range n {
		f.exec(t, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('order', $1, 'created', $2, '{}')`,
			fmt.Sprintf("a%d", i%2), fmt.Sprintf("bk-%d", i))
	}
	testenv.WaitFor(t, 60*time.Second, "every row in the stream", func() (bool, error) {
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs >= uint64(n), nil
	})
	r.stop(t)
	return s, r
}

// relay verify --sink nats audits the stream: after relay run published
// every row it exits 0; with a message deleted from the stream it exits 1
// naming that row. relay recover --sink nats takes the sink flags too.
func TestVerifySinkNATS(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	n := testenv.NewNATS(t)
	sink := []string{"--sink", "nats", "--sink-url", n.URL}
	s, _ := relayToNATS(t, f, n.JetStream(t), 4, sink...)

	args := append([]string{"--since", "1h", "--grace", "0s"}, sink...)
	out := f.cli(t, "verify", args...)
	wantCode(t, out, 0)
	for _, want := range []string{"rows:          4", "found:         4", "missing:       0"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out.stdout)
		}
	}

	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	out = f.cli(t, "verify", args...)
	wantCode(t, out, 1)
	wantOneErrorLine(t, out.stderr, "1 rows missing")
	if !strings.Contains(out.stdout, m.Header.Get("message-id")+"  topic outbox.order") {
		t.Errorf("verify output does not name %s:\n%s", m.Header.Get("message-id"), out.stdout)
	}

	// recover reads the sink flags (no gap here: nothing to do).
	wantCode(t, f.cli(t, "recover", sink...), 0)
}
