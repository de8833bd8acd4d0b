package inboxrabbitmq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxrabbitmq"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// fixture is a stream and a dead-letter stream of the test's own on the
// shared node, and an inbox on a fresh database.
type fixture struct {
	*inboxtest.Bundle
	rabbit      *testenv.RabbitMQ
	env         *stream.Environment
	stream, dlq string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	r := testenv.SharedRabbitMQ(t)
	f := &fixture{rabbit: r, env: r.Environment(t), stream: "outbox." + t.Name(), dlq: "dlq." + t.Name()}
	for _, s := range []string{f.stream, f.dlq} {
		testenv.DeclareStream(t, f.env, s)
	}
	f.Bundle = inboxtest.Setup(t, nil)
	return f
}

// publish stores a message with the relay's headers for key (none when
// key is empty), copies times.
func (f *fixture) publish(t *testing.T, key string, copies int) {
	t.Helper()
	pr, err := f.env.NewProducer(f.stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var msgs []message.StreamMessage
	for range copies {
		m := amqp.NewMessage([]byte(`{"key":"` + key + `"}`))
		if key != "" {
			m.ApplicationProperties = map[string]any{"message-id": "id-" + key, "business-key": key}
		}
		msgs = append(msgs, m)
	}
	if err := pr.BatchSend(msgs); err != nil {
		t.Fatal(err)
	}
}

// run runs a consumer named name with handler until it settled a
// message of business key last and stored its offset, then stops it and
// checks it stopped cleanly.
func (f *fixture) run(t *testing.T, name, last string, handler inbox.TxHandler[pgx.Tx]) {
	t.Helper()
	var (
		mu     sync.Mutex
		offset int64 = -1
	)
	c, err := inboxrabbitmq.New(&inboxrabbitmq.Config[pgx.Tx]{URI: f.rabbit.StreamURI, Stream: f.stream, Name: name, Inbox: f.In,
		Handler: handler, DeadLetterStream: f.dlq, StoreEvery: 7, MetricsInterval: -1,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			if msg.BusinessKey == last && res.Outcome.Acked() {
				mu.Lock()
				offset = msg.Offset
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testenv.WaitFor(t, 60*time.Second, "the last message's offset stored", func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("run ended early: %v", err)
		default:
		}
		mu.Lock()
		want := offset
		mu.Unlock()
		stored, err := f.env.QueryOffset(name, f.stream)
		return want >= 0 && err == nil && stored >= want, nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Each message's effect happens once however often it is delivered: every
// message is stored three times, one handler run fails and is retried, a
// second run resumes after the stored offset, and a consumer of another
// name reads the whole stream again. A message without the contract's
// headers is dead-lettered, with the dead-letter headers, on each
// delivery.
func TestEffectsOnceWhenDeliveredManyTimes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.publish(t, "", 1)
	var ks []string
	for i := range 20 {
		ks = append(ks, fmt.Sprintf("k%d", i))
		f.publish(t, ks[i], 3)
	}
	f.run(t, "billing", "k19", inboxtest.FailOnce("k5"))
	inboxtest.WantEffectOnce(t, f.DB, ks...)
	if row := inboxtest.ReadRow(t, f.DB, inboxtest.Consumer, "id-k5"); row.Status != "COMPLETED" || row.Attempts != 2 {
		t.Errorf("k5 row: %+v", row)
	}

	// Resume after the stored offset, with more to read.
	f.publish(t, "k20", 2)
	ks = append(ks, "k20")
	f.run(t, "billing", "k20", inboxtest.InsertEffect)
	// Read the whole stream again.
	f.run(t, "billing-replay", "k20", inboxtest.InsertEffect)
	inboxtest.WantEffectOnce(t, f.DB, ks...)

	dead := f.rabbit.ReadStream(t, f.dlq)
	if len(dead) != 2 {
		t.Fatalf("dead letters: %d, want 2 (one per delivery of the message without headers)", len(dead))
	}
	p := dead[0].ApplicationProperties
	if p[inbox.HeaderDLQReason] != inbox.ReasonMissingHeaders || p[inbox.HeaderDLQConsumer] != inboxtest.Consumer ||
		p[inbox.HeaderDLQOriginalTopic] != f.stream || p[inbox.HeaderDLQOriginalOffset] != "0" {
		t.Fatalf("dead letter headers: %v", p)
	}
}

// A handler that always fails ends in the dead-letter stream after the
// inbox's attempts, and the loop goes on past it.
func TestDeadLettersAtAttemptLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.publish(t, "poison", 1)
	f.publish(t, "fine", 1)
	f.run(t, "billing", "fine", inboxtest.FailAlways("poison"))
	inboxtest.WantEffectOnce(t, f.DB, "fine")
	if row := inboxtest.ReadRow(t, f.DB, inboxtest.Consumer, "id-poison"); row.Status != "FAILED_FINAL" {
		t.Errorf("poison row: %+v", row)
	}
	dead := f.rabbit.ReadStream(t, f.dlq)
	if len(dead) != 1 || dead[0].ApplicationProperties["business-key"] != "poison" {
		t.Fatalf("dead letters: %d %v", len(dead), dead)
	}
}
