package testenv_test

import (
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The shared RabbitMQ node serves the stream protocol.
func TestRabbitMQStreams(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	if err := env.DeclareStream("testenv-rabbitmq", &stream.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := env.StreamExists("testenv-rabbitmq"); err != nil || !ok {
		t.Fatalf("stream exists: %v %v", ok, err)
	}
}
