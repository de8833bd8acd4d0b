package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/streamconn"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The sinks -sinks names, as relay run --sink spells them.
const (
	sinkKafka    = "kafka"
	sinkNATS     = "nats"
	sinkRabbitMQ = "rabbitmq"
)

// natsAtomic is -nats-atomic.
var natsAtomic bool

// The Kafka brokers of the sinks mode's drains (-sinks-kafka).
const (
	sinksKafkaFake   = "kfake"
	sinksKafkaApache = "apache"
)

// sinksKafka is -sinks-kafka: the broker of the Kafka sink in the sinks
// mode's drains.
var sinksKafka = sinksKafkaFake

// natsStream is the JetStream stream that captures the bench's subjects
// (topic.bucket: outbox.bench.0 .. outbox.bench.15).
const natsStream = "OUTBOX"

// parseSinks reads -sinks: known names, each once, Kafka among them (the
// reference every other sink is compared with).
func parseSinks(v string) ([]string, error) {
	var sinks []string
	for _, f := range strings.Split(v, ",") {
		s := strings.TrimSpace(f)
		switch {
		case s != sinkKafka && s != sinkNATS && s != sinkRabbitMQ:
			return nil, fmt.Errorf("-sinks: %q is not one of %s, %s, %s", s, sinkKafka, sinkNATS, sinkRabbitMQ)
		case slices.Contains(sinks, s):
			return nil, fmt.Errorf("-sinks: %s twice", s)
		}
		sinks = append(sinks, s)
	}
	if !slices.Contains(sinks, sinkKafka) {
		return nil, fmt.Errorf("-sinks: the list must hold %s, the sink the others are compared with", sinkKafka)
	}
	return sinks, nil
}

// sinkOrder lists the runs of the sinks mode: rounds of each sink, in the
// order of sinks and then reversed (ABC CBA ABC...), so that no sink
// always runs first or last.
func sinkOrder(sinks []string, rounds int) []string {
	var order []string
	for i := range rounds {
		round := slices.Clone(sinks)
		if i%2 == 1 {
			slices.Reverse(round)
		}
		order = append(order, round...)
	}
	return order
}

// sinkBroker is the broker of one sink in the sinks mode: how relay run
// reaches it and a fresh destination for a run.
type sinkBroker interface {
	// describe says what the broker is and how it stores, for the output.
	describe() string
	// fresh empties the destination (topic, stream) before a run.
	fresh(ctx context.Context) error
	// relayArgs are relay run's arguments that point it at the broker.
	relayArgs() []string
	// pid is the broker's process (0 when it is this one).
	pid() int
	// consumerSpec is the latency mode's consumer process's address of
	// the destination (see runAsConsumer).
	consumerSpec() string
	stop()
}

// drainBroker is a sinkBroker of the drain mode, which also says how many
// records the destination holds, read from the broker itself.
type drainBroker interface {
	sinkBroker
	count(ctx context.Context) (int64, error)
}

// kafkaDrainBroker is an in-process kfake broker, a new cluster for each
// run (kfake keeps every record in memory), as the Kafka drain uses.
type kafkaDrainBroker struct {
	cluster *kfake.Cluster
	cl      *kgo.Client
	adm     *kadm.Client
}

func (b *kafkaDrainBroker) describe() string {
	return "kfake in this process (records in memory, nothing on disk), topic " + topic + " with 4 partitions created before the drain"
}

func (b *kafkaDrainBroker) fresh(context.Context) error {
	b.stop()
	cluster, err := kfake.NewCluster(testenv.ProduceByName(), kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RequestTimeoutOverhead(10*time.Second))
	if err != nil {
		cluster.Close()
		return err
	}
	b.cluster, b.cl, b.adm = cluster, cl, kadm.NewClient(cl)
	return nil
}

func (b *kafkaDrainBroker) relayArgs() []string { return kafkaArgs(b.cluster.ListenAddrs()) }

func (b *kafkaDrainBroker) count(ctx context.Context) (int64, error) {
	return topicEvents(ctx, b.adm, topic)
}

func (b *kafkaDrainBroker) pid() int { return 0 }

func (b *kafkaDrainBroker) consumerSpec() string { return "" }

func (b *kafkaDrainBroker) stop() {
	if b.cl != nil {
		b.cl.Close()
		b.cluster.Close()
		b.cl, b.cluster, b.adm = nil, nil, nil
	}
}

// apacheKafkaDrainBroker is an Apache Kafka broker in a JVM of its own
// (testenv's, the version pinned in test/kafka/pom.xml), with the topic
// deleted and created again before each run (-sinks-kafka apache).
type apacheKafkaDrainBroker struct {
	k   *testenv.ApacheKafka
	cl  *kgo.Client
	adm *kadm.Client
}

// startApacheKafkaDrainBroker starts the broker (and fetches it with
// Maven the first time).
func startApacheKafkaDrainBroker(ctx context.Context) (*apacheKafkaDrainBroker, error) {
	k, err := testenv.StartApacheKafka(ctx)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		k.Stop()
		return nil, err
	}
	return &apacheKafkaDrainBroker{k: k, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (b *apacheKafkaDrainBroker) describe() string {
	return "Apache Kafka in a JVM of its own (one broker, the log on disk and flushed by the OS: Kafka's defaults), topic " + topic +
		" with 4 partitions deleted and created again before each drain"
}

// fresh deletes the topic and creates it again; the broker deletes a
// topic asynchronously, so the creation is retried until it is gone.
func (b *apacheKafkaDrainBroker) fresh(ctx context.Context) error {
	if _, err := b.adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("kafka: delete topic %s: %w", topic, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		resp, err := b.adm.CreateTopic(ctx, 4, 1, nil, topic)
		if err == nil && resp.Err == nil {
			return nil
		}
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("kafka: create topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka: topic %s still there after its deletion: %w", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (b *apacheKafkaDrainBroker) relayArgs() []string { return kafkaArgs(b.k.Brokers) }

func (b *apacheKafkaDrainBroker) count(ctx context.Context) (int64, error) {
	return topicEvents(ctx, b.adm, topic)
}

func (b *apacheKafkaDrainBroker) pid() int { return b.k.PID() }

func (b *apacheKafkaDrainBroker) consumerSpec() string { return "" }

func (b *apacheKafkaDrainBroker) stop() {
	b.cl.Close()
	b.k.Stop()
}

// kafkaArgs points relay run at Kafka brokers.
func kafkaArgs(brokers []string) []string {
	return []string{"--brokers", strings.Join(brokers, ",")}
}

// natsBroker is a nats-server with JetStream on disk, every write synced
// before its PubAck (testenv's settings), and the stream natsStream,
// created anew for each run (its duplicate window would otherwise drop
// the next drain's copies of the same message IDs).
type natsBroker struct {
	url  string
	proc int // the server's process, 0 when it runs in this one
	nc   *nats.Conn
	js   jetstream.JetStream
	done func()
	// atomic creates the stream with atomic publish allowed
	// (-nats-atomic): the relay then writes atomic batches.
	atomic bool
}

// newNATSBroker connects to the nats-server at url, whose process is
// proc (0: this one), stopped by done.
func newNATSBroker(url string, proc int, done func()) (*natsBroker, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		done()
		return nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		done()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &natsBroker{url: url, proc: proc, nc: nc, js: js, done: done, atomic: natsAtomic}, nil
}

func (b *natsBroker) describe() string {
	return fmt.Sprintf("embedded nats-server %s, JetStream file store in a temporary directory with sync_interval: always (fsync before every PubAck), "+
		"stream %s (subjects %s.>, file storage, one replica, the default 2m duplicate window on Nats-Msg-Id, atomic publish %v)", server.VERSION, natsStream, strings.Split(topic, ".")[0], b.atomic)
}

func (b *natsBroker) fresh(ctx context.Context) error {
	if err := b.js.DeleteStream(ctx, natsStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("nats: delete stream %s: %w", natsStream, err)
	}
	_, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{strings.Split(topic, ".")[0] + ".>"},
		Storage: jetstream.FileStorage, AllowAtomicPublish: b.atomic})
	if err != nil {
		return fmt.Errorf("nats: create stream %s: %w", natsStream, err)
	}
	return nil
}

func (b *natsBroker) relayArgs() []string { return []string{"--sink", sinkNATS, "--sink-url", b.url} }

func (b *natsBroker) count(ctx context.Context) (int64, error) {
	s, err := b.js.Stream(ctx, natsStream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

func (b *natsBroker) pid() int { return b.proc }

func (b *natsBroker) consumerSpec() string { return sinkNATS + "|" + b.url }

func (b *natsBroker) stop() {
	b.nc.Close()
	b.done()
}

// rabbitMQBroker is a Debian rabbitmq-server node with the stream plugin
// (testenv's), and the stream topic, declared anew for each run.
type rabbitMQBroker struct {
	node *testenv.RabbitMQ
	env  *stream.Environment
	proc int
	// counting makes fresh start counter, which reads the stream of the
	// run (the drain mode's); received counts its messages.
	counting bool
	counter  *stream.Consumer
	received atomic.Int64
	// acked, when set, says the relay acknowledged the whole backlog of
	// want rows.
	acked func(context.Context) (bool, error)
	want  int64
}

// startRabbitMQBroker starts the node (seconds) and connects to it;
// counting says fresh starts the drain mode's counting consumer.
func startRabbitMQBroker(ctx context.Context, counting bool) (*rabbitMQBroker, error) {
	logs.SetLogger(quietStreamLog{})
	node, err := testenv.StartRabbitMQ(ctx)
	if err != nil {
		return nil, err
	}
	env, err := stream.NewEnvironment(streamconn.Options(node.StreamURI))
	if err != nil {
		node.Stop()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	b := &rabbitMQBroker{node: node, env: env, counting: counting}
	if port, err := uriPort(node.StreamURI); err == nil {
		b.proc = listeningPID(port)
	}
	return b, nil
}

func (b *rabbitMQBroker) describe() string {
	return "rabbitmq-server " + rabbitMQVersion() + " (this machine's) with the rabbitmq_stream plugin, stream " + topic +
		" (one member; the relay's producer named after the slot, publishing IDs from the WAL)"
}

func (b *rabbitMQBroker) fresh(context.Context) error {
	if b.counter != nil {
		_ = b.counter.Close()
		b.counter = nil
	}
	if err := b.env.DeleteStream(topic); err != nil && !errors.Is(err, stream.StreamDoesNotExist) {
		return fmt.Errorf("rabbitmq: delete stream %s: %w", topic, err)
	}
	if err := b.env.DeclareStream(topic, &stream.StreamOptions{}); err != nil {
		return fmt.Errorf("rabbitmq: declare stream %s: %w", topic, err)
	}
	if !b.counting {
		return nil
	}
	// The drain's count: a consumer that reads the stream as the relay
	// writes it, in this process.
	b.received.Store(0)
	// The relay's chunks can be single messages: with the client's
	// default 10 credits (a chunk each) the count trailed the stream by
	// a credit's round trip per chunk.
	c, err := b.env.NewConsumer(topic, func(stream.ConsumerContext, *amqp.Message) { b.received.Add(1) },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).SetInitialCredits(1000))
	if err != nil {
		return fmt.Errorf("rabbitmq: consume %s: %w", topic, err)
	}
	b.counter = c
	return nil
}

func (b *rabbitMQBroker) relayArgs() []string {
	return []string{"--sink", sinkRabbitMQ, "--sink-url", b.node.StreamURI}
}

// count is how many messages the stream holds, as far as the bench
// knows: what its consumer of the stream received, or, once acked says
// the relay acknowledged the whole backlog (which it does only past the
// stream's publish confirmations), the stream's length as the node
// itself reports it (rabbitmqctl list_queues). The consumer alone was not
// enough here: it read the relay's streams at about 150 messages a
// second on this machine, far behind the relay, with the stream client's
// 8 KiB socket buffers (internal/streamconn leaves them to the kernel
// now); and a subscription at the
// offset "last" each poll (the stream statistics command came with
// RabbitMQ 3.11) delivered nothing, for minutes, in some drains whose
// stream held every row.
func (b *rabbitMQBroker) count(ctx context.Context) (int64, error) {
	n := b.received.Load()
	if b.acked == nil {
		return n, nil
	}
	done, err := b.acked(ctx)
	if err != nil || !done {
		return n, err
	}
	// The node counts a stream's messages in its statistics, every few
	// seconds (a drain read 0 for two seconds after the relay confirmed
	// every row): the drain ended at this poll, and the length, once the
	// statistics caught up, checks it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := b.length(ctx)
		if err != nil || l >= b.want || time.Now().After(deadline) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// length asks the node how many messages the stream topic holds, with
// rabbitmqctl and the node's name, cookie and port mapper read from its
// process's environment.
func (b *rabbitMQBroker) length(ctx context.Context) (int64, error) {
	script, err := testenv.RabbitMQInstalled()
	if err != nil {
		return 0, err
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(b.proc) + "/environ")
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: the node's environment: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(script), "rabbitmqctl"), "-q", "list_queues", "name", "messages")
	for _, kv := range strings.Split(string(env), "\x00") {
		for _, key := range []string{"HOME=", "ERL_EPMD_PORT=", "RABBITMQ_NODENAME="} {
			if strings.HasPrefix(kv, key) {
				cmd.Env = append(cmd.Env, kv)
			}
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("rabbitmqctl list_queues: %w: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == topic {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("rabbitmqctl list_queues: no stream %s in %q", topic, out)
}

func (b *rabbitMQBroker) pid() int { return b.proc }

func (b *rabbitMQBroker) consumerSpec() string { return sinkRabbitMQ + "|" + b.node.StreamURI }

func (b *rabbitMQBroker) stop() {
	if b.counter != nil {
		_ = b.counter.Close()
	}
	_ = b.env.Close()
	b.node.Stop()
}

// rabbitMQVersion is the version of the rabbitmq-server testenv starts,
// from its installation's lib directory ("" when it is elsewhere).
func rabbitMQVersion() string {
	script, err := testenv.RabbitMQInstalled()
	if err != nil {
		return ""
	}
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(script), "..", "lib", "rabbitmq_server-*"))
	if len(dirs) == 0 {
		return ""
	}
	return strings.TrimPrefix(filepath.Base(dirs[0]), "rabbitmq_server-")
}

// uriPort is the port of a URI such as rabbitmq-stream://u:p@host:port/.
func uriPort(uri string) (int, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Port())
}

// listeningPID is the process listening on loopback TCP port (the
// broker's, for the latency mode's CPU lines), found through the socket's
// inode in /proc/net/tcp and the processes' descriptors; 0 when none is.
func listeningPID(port int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	inode := ""
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local_address rem_address st ... inode: st 0A is LISTEN.
		f := strings.Fields(line)
		if len(f) > 9 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return 0
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == "socket:["+inode+"]" {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}

// quietStreamLog is the RabbitMQ stream client's logger in this process:
// it drops the lines of a consumer closed while its last chunk is still
// arriving (count closes one every poll) and logs the rest.
type quietStreamLog struct{}

func (quietStreamLog) Info(string, ...any) {}

func (quietStreamLog) Debug(string, ...any) {}

func (quietStreamLog) Error(m string, v ...any) { quietStreamLog{}.print("error", m, v...) }

func (quietStreamLog) Warn(m string, v ...any) { quietStreamLog{}.print("warn", m, v...) }

func (quietStreamLog) print(level, m string, v ...any) {
	line := fmt.Sprintf(m, v...)
	if strings.Contains(line, "use of closed network connection") || strings.Contains(line, "broken pipe") {
		return
	}
	fmt.Fprintf(os.Stderr, "rabbitmq stream client: %s: %s\n", level, line)
}
