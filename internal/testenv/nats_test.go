package testenv_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The embedded nats-server keeps a JetStream stream across a restart on
// the same port and store, and a client reconnects to it.
func TestNATSRestartKeepsStream(t *testing.T) {
	t.Parallel()
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "s", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the stream after the restart", func() (bool, error) {
		s, err := js.Stream(ctx, "s")
		if err != nil {
			return false, nil
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1, nil
	})
}
