package inboxnats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxnats"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// fixture is a NATS server with the relay's stream and a dead-letter
// stream, and an inbox on a fresh database.
type fixture struct {
	*inboxtest.Bundle
	nats *testenv.NATS
	js   jetstream.JetStream
}

func setup(t *testing.T) *fixture {
	t.Helper()
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	for name, subject := range map[string]string{"OUTBOX": "outbox.>", "DLQ": inboxnats.DefaultDeadLetterSubject} {
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{Bundle: inboxtest.Setup(t, nil), nats: n, js: js}
}

// publish stores a message with the relay's headers for key (none when
// key is empty), copies times.
func (f *fixture) publish(t *testing.T, key string, copies int) {
	t.Helper()
	for range copies {
		m := &nats.Msg{Subject: "outbox.payment.1", Data: []byte(`{"key":"` + key + `"}`), Header: nats.Header{}}
		if key != "" {
			m.Header["message-id"] = []string{"id-" + key}
			m.Header["business-key"] = []string{key}
		}
		if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs a consumer with cfg's handler until every message of the
// stream is acknowledged, then stops it and checks it stopped cleanly.
func (f *fixture) run(t *testing.T, handler inbox.TxHandler[pgx.Tx]) {
	t.Helper()
	c, err := inboxnats.New(&inboxnats.Config[pgx.Tx]{URL: f.nats.URL, Stream: "OUTBOX", Durable: "billing", Inbox: f.In,
		Handler: handler, MetricsInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := f.js.Stream(t.Context(), "OUTBOX")
	if err != nil {
		t.Fatal(err)
	}
	last := stream.CachedInfo().State.LastSeq
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	// The ack floor, not the pending counts alone: a consumer's counts
	// can read zero before its first pull.
	testenv.WaitFor(t, 60*time.Second, "every message acknowledged", func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("run ended early: %v", err)
		default:
		}
		cons, err := f.js.Consumer(t.Context(), "OUTBOX", "billing")
		if err != nil {
			return false, nil
		}
		info, err := cons.Info(t.Context())
		return err == nil && info.AckFloor.Stream >= last && info.NumPending == 0 && info.NumAckPending == 0, nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func keys(n int) []string {
	var ks []string
	for i := range n {
		ks = append(ks, fmt.Sprintf("k%d", i))
	}
	return ks
}

// Each message's effect happens once however often it is delivered: every
// message is stored three times, one handler run fails and is retried,
// and then the whole stream is delivered again to a new consumer of the
// same name. A message without the contract's headers is dead-lettered,
// with the dead-letter headers, on each delivery.
func TestEffectsOnceWhenDeliveredManyTimes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ks := keys(20)
	for _, k := range ks {
		f.publish(t, k, 3)
	}
	f.publish(t, "", 1)
	f.run(t, inboxtest.FailOnce("k5"))
	inboxtest.WantEffectOnce(t, f.DB, ks...)
	if row := inboxtest.ReadRow(t, f.DB, inboxtest.Consumer, "id-k5"); row.Status != "COMPLETED" || row.Attempts != 2 {
		t.Errorf("k5 row: %+v", row)
	}

	// Deliver the whole stream again.
	if err := f.js.DeleteConsumer(t.Context(), "OUTBOX", "billing"); err != nil {
		t.Fatal(err)
	}
	f.run(t, inboxtest.InsertEffect)
	inboxtest.WantEffectOnce(t, f.DB, ks...)

	dlq, err := f.js.Stream(t.Context(), "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("dead letters: %d, want 2 (one per delivery of the message without headers)", info.State.Msgs)
	}
	m, err := dlq.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(inbox.HeaderDLQReason) != inbox.ReasonMissingHeaders || m.Header.Get(inbox.HeaderDLQConsumer) != inboxtest.Consumer ||
		m.Header.Get(inbox.HeaderDLQOriginalTopic) != "outbox.payment.1" || m.Header.Get(inbox.HeaderDLQOriginalOffset) != "61" {
		t.Fatalf("dead letter headers: %v", m.Header)
	}
}

// A handler that always fails ends in the dead-letter subject after the
// inbox's attempts, and its message is acknowledged.
func TestDeadLettersAtAttemptLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.publish(t, "poison", 1)
	f.publish(t, "fine", 1)
	f.run(t, inboxtest.FailAlways("poison"))
	inboxtest.WantEffectOnce(t, f.DB, "fine")
	if row := inboxtest.ReadRow(t, f.DB, inboxtest.Consumer, "id-poison"); row.Status != "FAILED_FINAL" {
		t.Errorf("poison row: %+v", row)
	}
	dlq, err := f.js.Stream(t.Context(), "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	m, err := dlq.GetLastMsgForSubject(t.Context(), inboxnats.DefaultDeadLetterSubject)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(inbox.HeaderDLQReason) != inbox.ReasonFailedFinal && m.Header.Get(inbox.HeaderDLQReason) != inbox.ReasonMaxAttempts {
		t.Fatalf("dead letter: %v", m.Header)
	}
}
