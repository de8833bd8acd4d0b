package inboxkafka_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A broker a long round trip away (300ms, another continent) is consumed
// with the default MaxWait. (kafka-go, the former client, made MaxWait the
// deadline of a fetch's response: at its former default of 250ms every
// response came too late and nothing was ever delivered.)
func TestConsumerReachesADistantBroker(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "distant", 1, nil)
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`})
	cfg := l.Config()
	cfg.MaxWait, cfg.SessionTimeout, cfg.KafkaOpts = 0, 0, []kgo.Opt{kgo.Dialer(distantDial(300 * time.Millisecond))}
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 1})
	inboxtest.WantEffectOnce(t, l.DB, "k-1")
}

// distantDial dials the broker and hands the client a connection on which
// what the broker sends arrives delay later, as from a broker far away;
// requests go out at once. The connection keeps net.Conn's deadlines, so a
// response that comes after the read deadline times the read out.
func distantDial(delay time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		broker, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		client, near := net.Pipe()
		go func() {
			_, _ = io.Copy(broker, near)
			_ = broker.Close()
		}()
		type chunk struct {
			b  []byte
			at time.Time
		}
		chunks := make(chan chunk, 1024)
		go func() {
			defer close(chunks)
			for {
				buf := make([]byte, 64<<10)
				n, err := broker.Read(buf)
				if n > 0 {
					chunks <- chunk{buf[:n], time.Now().Add(delay)}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer func() { _ = near.Close() }()
			for c := range chunks {
				time.Sleep(time.Until(c.at)) // the latency being emulated
				if _, err := near.Write(c.b); err != nil {
					_ = broker.Close()
					for range chunks { // until the reader sees the close
					}
					return
				}
			}
		}()
		return client, nil
	}
}

// A consumer pointed at brokers that never answer (a wrong address) stops
// at its start with an error naming them, within StartTimeout, as relay
// run does; it used to log its first warning after ~10s and retry for ever.
func TestConsumerFailsFastOnUnreachableBrokers(t *testing.T) {
	t.Parallel()
	b := inboxtest.Setup(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers: []string{addr}, GroupID: "unreachable", Topics: []string{"t"}, Inbox: b.In, Handler: inboxtest.InsertEffect,
		StartTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, inboxkafka.ErrBrokersUnreachable) || !strings.Contains(err.Error(), addr) || ctx.Err() != nil {
		t.Fatalf("Run: %v, want ErrBrokersUnreachable naming %s before the test's deadline", err, addr)
	}
}

// A retriable broker error on a fetch is transient: the client retries it
// by itself (kgo hands the loop only errors it gives up on, which
// pgoutbox_inbox_fetch_errors_total counts) and the loop handles the
// messages behind it.
func TestConsumerSurvivesFetchError(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "flaky", 1, nil)
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`})

	fake := l.Kafka.Fake(t, "an injected KAFKA_STORAGE_ERROR")
	// The first fetch of the l.Topic answers KAFKA_STORAGE_ERROR (retriable)
	// for every partition.
	var injected atomic.Bool
	fake.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 {
			fake.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 56 // KAFKA_STORAGE_ERROR
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		injected.Store(true)
		return resp, nil, true
	})

	cfg := l.Config()
	cfg.MetricsInterval = -1
	rc := inboxtest.StartConsumer(t, cfg)
	rc.WaitOffsets(t, map[int]int64{0: 1}) // m-1 committed despite the fetch error
	if !injected.Load() {
		t.Fatal("the fetch error was never injected")
	}
	// Later messages are handled too.
	l.Produce(t, inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})
	rc.WaitOffsets(t, map[int]int64{0: 2})
	rc.Stop(t)
	if inboxtest.Effects(t, l.DB, "k-1") != 1 || inboxtest.Effects(t, l.DB, "k-2") != 1 {
		t.Fatal("effects missing")
	}
}

// A short session survives a message that is retried for longer than the
// session: the l.Group heartbeat runs every third of SessionTimeout, not every
// 3s (kgo's default), so the member is never expired and nothing is
// redelivered by a rebalance.
func TestConsumerShortSessionOutlivesRetries(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "slow", 1, &inbox.Config{MaxAttempts: 1000, Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`}, inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})

	fake := l.Kafka.Fake(t, "counts JoinGroup requests")
	var joins atomic.Int32
	fake.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		joins.Add(1)
		return nil, nil, false
	})
	var first time.Time
	var deliveries atomic.Int32
	cfg := l.Config()
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if msg.ID == "m-1" {
			// Fails for 4s, with no offset commit meanwhile.
			if first.IsZero() {
				first = time.Now()
			}
			if time.Since(first) < 4*time.Second {
				return "", errors.New("not yet")
			}
		}
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		if res.Outcome.Acked() {
			deliveries.Add(1)
		}
	}
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 2})
	// One JoinGroup for the first generation (a client may send a second
	// one to learn its member ID); an expired session adds more.
	if n := joins.Load(); n > 2 {
		t.Errorf("%d JoinGroup requests: the session expired while m-1 was retried", n)
	}
	if n := deliveries.Load(); n != 2 {
		t.Errorf("%d acked deliveries of 2 messages", n)
	}
}

// A consumer started before its l.Topic exists consumes the l.Topic once a
// producer creates it (auto-creation), and its metadata requests do not
// create the l.Topic. kafka-go's reader did not on Apache Kafka: its l.Group
// leader assigned nothing and never rejoined (docs/kafka.md).
func TestConsumerJoinsBeforeItsTopicExists(t *testing.T) {
	t.Parallel()
	k := testenv.NewBroker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	topic, group := k.Topic("appears-later"), k.Topic("appears-later-group")
	b := inboxtest.Setup(t, nil)
	rc := inboxtest.StartConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.In, MaxWait: inboxtest.MaxWait,
		SessionTimeout: time.Second, Handler: inboxtest.InsertEffect, MetricsInterval: -1,
	})
	// kgo joins the group once the topic exists (a metadata answer lists
	// it), so no group of one member assigned nothing stays stable as
	// kafka-go's did; give the consumer time to ask for the topic first.
	time.Sleep(2 * time.Second)
	if k.TopicExists(t, topic) {
		t.Fatalf("topic %s exists before the first record", topic)
	}
	inboxtest.Produce(t, k.Brokers, topic, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`})
	rc.WaitOffsets(t, map[int]int64{0: 1})
	rc.Stop(t)
	inboxtest.WantEffectOnce(t, b.DB, "k-1")
}

// The records of an aborted Kafka transaction (a fenced exactly-once
// relay's) never reach a handler: the loop reads read_committed by default,
// and the transaction markers are not records. ReadUncommitted reads the
// aborted records too (so the first half can fail).
func TestConsumerSkipsAbortedTransactions(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "txns", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Brokers()...), kgo.TransactionalID(l.Kafka.Topic("relay-slot-test")), kgo.DefaultProduceTopic(l.Topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	txn := func(end kgo.TransactionEndTry, recs ...inboxtest.Rec) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := cl.ProduceSync(ctx, r.KgoRecord(l.Topic)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets: aborted 0 and 1, abort marker 2; committed 3, commit marker 4.
	txn(kgo.TryAbort, inboxtest.Rec{ID: "m-a1", Key: "k-a1", Value: `{}`}, inboxtest.Rec{ID: "m-a2", Key: "k-a2", Value: `{}`})
	txn(kgo.TryCommit, inboxtest.Rec{ID: "m-c1", Key: "k-c1", Value: `{}`})

	consume := func(group string, iso inboxkafka.Isolation) []string {
		t.Helper()
		var (
			mu   sync.Mutex
			seen []string
		)
		inboxtest.RunConsumer(t, &inboxkafka.Config[pgx.Tx]{
			Brokers: l.Brokers(), GroupID: group, Topics: []string{l.Topic}, Inbox: l.In, MaxWait: inboxtest.MaxWait,
			Isolation: iso, MetricsInterval: -1,
			Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
				mu.Lock()
				seen = append(seen, msg.ID)
				mu.Unlock()
				return "", nil
			},
		}, map[int]int64{0: 4}) // past m-c1; the commit marker is no record
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	if got := consume("rc-group", ""); !slices.Equal(got, []string{"m-c1"}) {
		t.Fatalf("read_committed handled %q, want only m-c1", got)
	}
	// A fresh inbox, so the committed record is not a duplicate of the
	// first run's.
	l.Bundle = inboxtest.Setup(t, nil)
	if got := consume("ru-group", inboxkafka.ReadUncommitted); !slices.Equal(got, []string{"m-a1", "m-a2", "m-c1"}) {
		t.Fatalf("read_uncommitted handled %q, want m-a1, m-a2, m-c1", got)
	}
}
