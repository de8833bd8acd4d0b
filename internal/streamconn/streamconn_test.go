package streamconn_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/streamconn"
	_ "github.com/pgoutbox/pgoutbox/internal/streamlog" // the client's lines through log/slog
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// A consumer on Options reads a stream's backlog at the speed of the node
// and the client, not of an 8 KiB receive window: 20,000 messages of 300
// bytes took about 100 s with the client's default buffers here (about
// 200 a second, the sender waiting on the window all the time) and a
// tenth of a second with Options. The bound, a minute, fails only the
// window's pace.
func TestConsumerReadsBacklogUnthrottled(t *testing.T) {
	t.Parallel()
	if _, err := testenv.RabbitMQInstalled(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	r := testenv.SharedRabbitMQ(t)
	env, err := stream.NewEnvironment(streamconn.Options(r.StreamURI))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	const name, n = "streamconn.backlog", 20_000
	testenv.DeclareStream(t, env, name)
	prod, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]message.StreamMessage, 0, 1000)
	for i := range n {
		batch = append(batch, amqp.NewMessage(make([]byte, 300)))
		if len(batch) == cap(batch) || i == n-1 {
			if err := prod.BatchSend(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	start := time.Now()
	c, err := env.NewConsumer(name, func(stream.ConsumerContext, *amqp.Message) { got.Add(1) },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for got.Load() < n && time.Since(start) < time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if got.Load() < n {
		t.Fatalf("the consumer read %d of %d messages in %v", got.Load(), n, took.Round(time.Millisecond))
	}
	t.Logf("read %d messages in %v", n, took.Round(time.Millisecond))
}

// Every stream connection of the module takes Options: no other file
// makes the client's environment options itself (they would get its 8 KiB
// buffers).
func TestOnlyOptionsMakesEnvironmentOptions(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Base(path) == "streamconn.go" || filepath.Base(path) == "streamconn_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("stream.NewEnvironmentOptions(")) {
			t.Errorf("%s makes stream.NewEnvironmentOptions itself: use streamconn.Options", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
