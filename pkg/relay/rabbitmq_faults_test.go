package relay_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A RabbitMQ broker restarted while writers commit rows loses nothing,
// and the relay rides it out: every committed row is in the stream
// (counted by message ID), each aggregate's rows in commit order, and no
// row twice (the named producer's publishing IDs drop what the relay
// writes again after the restart). The node is killed (SIGKILL) and
// started again, or stopped and started in an orderly way (rabbitmqctl
// stop_app, start_app: the broker closes the connections itself).
//
// testenv's Restart and StopStart return once a stream client completes
// its handshake with the node again. They returned once the stream port
// accepted a connection, which a node does before it answers, and which a
// killed node's socket did for moments after the kill. The test failed
// intermittently under load then (the restarted node refusing the test's
// reader; once the relay writing nothing for minutes after stop_app, a
// failure not explained by the readiness alone), and was kept out of
// make test; it has not failed since.
func TestRabbitMQSinkBrokerRestart(t *testing.T) {
	t.Parallel()
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, tc := range []struct {
		name    string
		restart func(*testenv.RabbitMQ) error
	}{
		{"kill", func(r *testenv.RabbitMQ) error { return r.Restart(context.Background()) }},
		{"stop_app", func(r *testenv.RabbitMQ) error { return r.StopStart(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			brokerRestart(t, tc.restart)
		})
	}
}

// brokerRestart is TestRabbitMQSinkBrokerRestart with restart.
func brokerRestart(t *testing.T, restart func(*testenv.RabbitMQ) error) {
	r, err := testenv.StartRabbitMQ(t.Context()) // its own node: the restart must not touch other tests'
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	s := rabbitSinkOn(t, r, nil)
	run := s.start(t)

	ctx, stop := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		byAgg = map[string][]string{} // commit order per aggregate
		werr  error
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agg := fmt.Sprintf("w%d", w)
			for n := 0; ctx.Err() == nil; n += 2 {
				var got []string
				err := pgx.BeginFunc(context.Background(), s.db.Pool, func(tx pgx.Tx) error {
					ids, err := s.writer.InsertManyTx(context.Background(), tx, []outbox.Message{msg(agg, n), msg(agg, n+1)})
					for _, id := range ids {
						got = append(got, id.String())
					}
					return err
				})
				mu.Lock()
				if err != nil {
					werr = err
				} else {
					byAgg[agg] = append(byAgg[agg], got...)
				}
				mu.Unlock()
				if err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if err := restart(r); err != nil {
		stop()
		wg.Wait()
		t.Fatalf("restart: %v", err)
	}
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	var all []string
	for _, ids := range byAgg {
		all = append(all, ids...)
	}
	s.waitStream(t, s.topic, all, 3*time.Minute)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	msgs := s.r.ReadStream(t, s.topic)
	missing, dups := s.check(t, s.topic, all)
	// Each aggregate's first deliveries in commit order.
	seen := map[string]bool{}
	order := map[string][]string{}
	for _, m := range msgs {
		id, _ := m.ApplicationProperties["message-id"].(string)
		agg, _ := m.ApplicationProperties["aggregate-id"].(string)
		if id != "" && !seen[id] {
			seen[id] = true
			order[agg] = append(order[agg], id)
		}
	}
	t.Logf("committed %d rows, stream holds %d messages: %d missing, %d duplicates", len(all), len(msgs), missing, dups)
	if missing != 0 || dups != 0 {
		t.Fatalf("%d of %d rows missing, %d duplicates", missing, len(all), dups)
	}
	for agg, ids := range byAgg {
		if !slices.Equal(order[agg], ids) {
			t.Fatalf("aggregate %s: the stream's order differs from the commit order", agg)
		}
	}
}

// Hostile rows are dead-lettered through the RabbitMQ sink, each with its
// reason, and the rows around them are published once: a payload over the
// stream protocol's frame size (1 MiB; the relay's own bound set above
// it, so the broker's side decides), a payload over the relay's bound, an
// invalid business key, a row with a header the relay writes and a row
// naming the dead-letter stream.
func TestRabbitMQSinkDeadLetters(t *testing.T) {
	t.Parallel()
	s := rabbitSinkSetup(t, func(c *relay.Config) { c.MaxMessageBytes = 4 << 20 })
	run := s.start(t)
	ctx := context.Background()
	var good []string
	good = append(good, s.insert(t, msg("a", 0))...)
	huge := msg("a", 1)
	huge.Payload = []byte(`{"pad": "` + strings.Repeat("x", 2<<20) + `"}`)
	over := msg("a", 2)
	over.Payload = []byte(`{"pad": "` + strings.Repeat("y", 5<<20) + `"}`)
	want := map[string]string{} // message ID -> reason
	for _, m := range []struct {
		m      outbox.Message
		reason string
	}{{huge, relaytype.ReasonTooLarge}, {over, relaytype.ReasonTooLarge}} {
		want[s.insert(t, m.m)[0]] = m.reason
		good = append(good, s.insert(t, msg("a", len(good)+10))...)
	}
	for _, row := range []struct {
		id, bk, headers, topic, reason string
	}{
		{"00000000-0000-7000-8000-0000000000c1", "", "", "", relaytype.ReasonInvalidKey},
		{"00000000-0000-7000-8000-0000000000c2", "k2", `{"dlq-reason": "too-large"}`, "", relaytype.ReasonBadHeaders},
		{"00000000-0000-7000-8000-0000000000c3", "k3", "", s.dlq, relaytype.ReasonBadTopic},
	} {
		if _, err := s.db.Pool.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers, topic)
			VALUES ($1, 'order', 'a', 'e', $2, '{}', $3, $4)`, row.id, row.bk, nullIfEmpty(row.headers), nullIfEmpty(row.topic)); err != nil {
			t.Fatal(err)
		}
		want[row.id] = row.reason
		good = append(good, s.insert(t, msg("a", len(good)+10))...)
	}
	s.waitStream(t, s.topic, good, 2*time.Minute)
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	s.waitStream(t, s.dlq, ids, time.Minute)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m, d := s.check(t, s.topic, good); m != 0 || d != 0 {
		t.Fatalf("good rows: %d missing, %d duplicates", m, d)
	}
	got := map[string]string{}
	for _, m := range s.r.ReadStream(t, s.dlq) {
		id, _ := m.ApplicationProperties["message-id"].(string)
		reason, _ := m.ApplicationProperties["dlq-reason"].(string)
		if _, dup := got[id]; dup {
			t.Errorf("dead letter %s twice", id)
		}
		got[id] = reason
	}
	for id, reason := range want {
		if got[id] != reason {
			t.Errorf("dead letter %s: reason %q, want %q (all: %v)", id, got[id], reason, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d dead letters %v, want %d", len(got), got, len(want))
	}
}
