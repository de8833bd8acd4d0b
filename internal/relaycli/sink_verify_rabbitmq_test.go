package relaycli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// relay verify --sink rabbitmq audits the streams: after relay run
// published every row it exits 0; with a row committed while no relay
// ran (it never reached the stream) it exits 1 naming that row. relay
// recover --sink rabbitmq takes the sink flags too.
func TestVerifySinkRabbitMQ(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	prefix := fmt.Sprintf("outbox%d.", time.Now().UnixNano())
	for _, name := range []string{prefix + "order", prefix + "dlq"} {
		if err := env.DeclareStream(name, &stream.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.DeleteStream(name) })
	}
	sink := []string{"--sink", "rabbitmq", "--sink-url", r.StreamURI, "--topic-template", prefix + "{aggregate_type}", "--dlq-topic", prefix + "dlq"}
	run := start(t, append(append([]string{"run", "--metrics-addr", "127.0.0.1:0", "--log-format", "json"}, sink...), f.args...)...)
	insert := func(i int) {
		f.exec(t, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('order', $1, 'created', $2, '{}')`,
			fmt.Sprintf("a%d", i%2), fmt.Sprintf("bk-%d", i))
	}
	for i := range 4 {
		insert(i)
	}
	testenv.WaitFor(t, 60*time.Second, "every row in the stream", func() (bool, error) {
		n := 0
		for _, m := range r.ReadStream(t, prefix+"order") {
			if m.ApplicationProperties["message-id"] != nil {
				n++
			}
		}
		return n >= 4, nil
	})
	run.stop(t)

	args := append([]string{"--since", "1h", "--grace", "0s"}, sink...)
	out := f.cli(t, "verify", append([]string{"--json"}, args...)...)
	wantCode(t, out, 0)
	var rep relaytype.VerifyReport
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out.stdout)
	}
	if rep.Rows != 4 || rep.Found != 4 || rep.Missing != 0 || rep.Duplicates != 0 {
		t.Fatalf("verify after the drain: %+v", rep)
	}

	insert(4) // no relay runs: it never reaches the stream
	var id string
	if err := f.db.Pool.QueryRow(t.Context(), `SELECT id::text FROM outbox WHERE business_key = 'bk-4'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	out = f.cli(t, "verify", args...)
	wantCode(t, out, 1)
	wantOneErrorLine(t, out.stderr, "1 rows missing")
	if !strings.Contains(out.stdout, id+"  topic "+prefix+"order") {
		t.Errorf("verify output does not name %s:\n%s", id, out.stdout)
	}

	// recover reads the sink flags (no gap here: nothing to do).
	wantCode(t, f.cli(t, "recover", sink...), 0)
}
