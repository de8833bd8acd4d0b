package inbox_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// A broker a long round trip away (300ms, another continent) is consumed
// with the default MaxWait. (kafka-go, the former client, made MaxWait the
// deadline of a fetch's response: at its former default of 250ms every
// response came too late and nothing was ever delivered.)
func TestConsumerReachesADistantBroker(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "distant", 1)
	group := k.Topic("distant-group")
	b := setup(t, nil)
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{}`})
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, Handler: insertEffect,
		KafkaOpts: []kgo.Opt{kgo.Dialer(distantDial(300 * time.Millisecond))},
	}, map[int]int64{0: 1})
	wantEffectOnce(t, b.db, "k-1")
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
	b := setup(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers: []string{addr}, GroupID: "unreachable", Topics: []string{"t"}, Inbox: b.in, Handler: insertEffect,
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
