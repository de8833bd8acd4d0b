package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/streamconn"
)

// envAsConsumer, when set, makes a relaybench process the consumer of the
// latency mode (see runAsConsumer): "brokers/partitions" for Kafka,
// "nats|URL" for the NATS stream natsStream, "rabbitmq|URI" for the
// RabbitMQ stream topic.
const envAsConsumer = "RELAYBENCH_AS_CONSUMER"

// runAsConsumer reads the destination of its environment from its start
// when this process was started as the consumer, and prints a line
// "seq received-unix-ns commit-unix-ms" on stdout for each record (seq -1
// for a record without the bench's business key; commit 0 where the
// broker's message has no commit time) until stdin ends. It reports
// whether it was the consumer; code is its exit code.
func runAsConsumer() (code int, ok bool) {
	v := os.Getenv(envAsConsumer)
	if v == "" {
		return 0, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	out := &receipts{w: bufio.NewWriter(os.Stdout)}
	var err error
	switch sink, addr, _ := strings.Cut(v, "|"); sink {
	case sinkNATS:
		err = consumeNATS(ctx, addr, out)
	case sinkRabbitMQ:
		err = consumeRabbitMQ(ctx, addr, out)
	default:
		err = consumeKafka(ctx, v, out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: consumer: %v\n", err)
		return 1, true
	}
	return 0, true
}

// receipts writes the consumer process's lines.
type receipts struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// add writes the line of one record received at now; flush sends the
// lines written so far to the parent.
func (r *receipts) add(businessKey []byte, now time.Time, commit int64) {
	seq, ok := businessKeySeq(businessKey)
	if !ok {
		seq = -1
	}
	r.mu.Lock()
	fmt.Fprintf(r.w, "%d %d %d\n", seq, now.UnixNano(), commit)
	r.mu.Unlock()
}

func (r *receipts) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Flush()
}

// consumeKafka reads every partition of topic (created empty by the
// broker) on "brokers/partitions", read_committed, with a franz-go client.
func consumeKafka(ctx context.Context, v string, out *receipts) error {
	brokers, parts, _ := strings.Cut(v, "/")
	partitions, err := strconv.Atoi(parts)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", envAsConsumer, v, err)
	}
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond), kgo.FetchMaxBytes(10<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := time.Now()
		for r := range fetches.RecordsAll() {
			var bk []byte
			for _, h := range r.Headers {
				if h.Key == "business-key" {
					bk = h.Value
				}
			}
			out.add(bk, now, r.Timestamp.UnixMilli())
		}
		// One write per poll the parent may be waiting for: buffering
		// across polls would delay the count, not the times.
		if err := out.flush(); err != nil {
			return nil // the parent is gone
		}
	}
	return nil
}

// consumeNATS reads the stream natsStream from its start with an ordered
// consumer (JetStream's lightest: no acknowledgements).
func consumeNATS(ctx context.Context, url string, out *receipts) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c, err := js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return err
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		now := time.Now()
		out.add([]byte(m.Headers().Get("business-key")), now, 0)
		_ = out.flush()
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}

// consumeRabbitMQ reads the stream topic from its first message.
func consumeRabbitMQ(ctx context.Context, uri string, out *receipts) error {
	logs.SetLogger(quietStreamLog{})
	env, err := stream.NewEnvironment(streamconn.Options(uri))
	if err != nil {
		return err
	}
	defer env.Close()
	c, err := env.NewConsumer(topic, func(_ stream.ConsumerContext, m *amqp.Message) {
		now := time.Now()
		bk, _ := m.ApplicationProperties["business-key"].(string)
		out.add([]byte(bk), now, 0)
		_ = out.flush()
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		return err
	}
	<-ctx.Done()
	return c.Close()
}

// consumer is the latency mode's Kafka consumer in a process of its own
// (this binary, started as the consumer), off the writer's Go scheduler
// and garbage collector.
type consumer struct {
	*child
	done chan struct{}
}

// startConsumer starts the consumer process on spec (see envAsConsumer)
// and calls record, from one goroutine, for each record it received: its
// sequence number (-1 when it has none), when it was received and its
// commit time (the record's timestamp, milliseconds; 0 when unknown).
func startConsumer(spec string, record func(seq int, recv, commit time.Time)) (*consumer, error) {
	ch, err := startChild(envAsConsumer + "=" + spec)
	if err != nil {
		return nil, err
	}
	c := &consumer{child: ch, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(c.stdout)
		for sc.Scan() {
			var seq int
			var recv, commit int64
			if _, err := fmt.Sscan(sc.Text(), &seq, &recv, &commit); err != nil {
				continue
			}
			record(seq, time.Unix(0, recv), time.UnixMilli(commit))
		}
	}()
	return c, nil
}

// stop ends the consumer process once it delivered what it printed.
func (c *consumer) stop() {
	c.stdin.Close()
	<-c.done // stdout ends with the process; Wait would close it first
	_ = c.cmd.Wait()
}

// kafkaConsumerSpec is the consumer's address of topic's partitions on
// brokers.
func kafkaConsumerSpec(brokers []string, partitions int) string {
	return strings.Join(brokers, ",") + "/" + strconv.Itoa(partitions)
}
