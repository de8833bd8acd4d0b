package producer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newProducer returns a producer to k, closed when t ends.
func newProducer(t *testing.T, k *testenv.Kafka, edit func(*producer.Config)) *producer.Producer {
	t.Helper()
	cfg := producer.Config{Brokers: k.Brokers, MaxMessageBytes: 1 << 20, AutoCreateTopics: true, RequestTimeout: 5 * time.Second}
	var buf syncBuf
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	})
	if edit != nil {
		edit(&cfg)
	}
	p, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func produce(t *testing.T, p *producer.Producer, recs ...*kgo.Record) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs, err := p.Produce(ctx, recs)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	return errs
}

// Keys go to the partition the Java client picks: murmur2 of the key,
// positive, modulo the partition count. The hashes are the test vectors of
// Kafka's own murmur2 test (clients UtilsTest.testMurmur2).
func TestKeysPartitionLikeJava(t *testing.T) {
	t.Parallel()
	const partitions = 7
	k := testenv.NewKafka(t, kfake.SeedTopics(partitions, "keys"))
	p := newProducer(t, k, nil)
	javaMurmur2 := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	var recs []*kgo.Record
	for key := range javaMurmur2 {
		recs = append(recs, &kgo.Record{Topic: "keys", Key: []byte(key), Value: []byte("v")})
	}
	for i, err := range produce(t, p, recs...) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for _, r := range recs {
		want := (javaMurmur2[string(r.Key)] & 0x7fffffff) % partitions
		if r.Partition != want {
			t.Fatalf("key %q went to partition %d, the Java client's murmur2 picks %d", r.Key, r.Partition, want)
		}
	}
}

// Every produced record gets its own outcome: a record over the topic's
// limit (read from the broker) fails with MESSAGE_TOO_LARGE, the others
// are acknowledged.
func TestProduceReportsEachRecord(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "50000"}))
	p := newProducer(t, k, nil)
	recs := []*kgo.Record{
		{Topic: "t", Key: []byte("a"), Value: []byte("small")},
		{Topic: "t", Key: []byte("a"), Value: make([]byte, 100_000)},
		{Topic: "t", Key: []byte("b"), Value: []byte("small")},
	}
	errs := produce(t, p, recs...)
	if errs[0] != nil || !errors.Is(errs[1], kerr.MessageTooLarge) || errs[2] != nil {
		t.Fatalf("errors %v, want nil, MESSAGE_TOO_LARGE, nil", errs)
	}
}

// One call may hold more records than kgo buffers by default (50,000):
// under manual flushing the surplus would fail at once with
// ErrMaxBuffered, so a large --batch-size could never be written.
func TestProduceLargeCall(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	p := newProducer(t, k, func(c *producer.Config) { c.MaxBufferedBytes = 64 << 20 })
	recs := make([]*kgo.Record, 60_000)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Key: []byte(strconv.Itoa(i % 100)), Value: []byte("v")}
	}
	for i, err := range produce(t, p, recs...) {
		if err != nil {
			t.Fatalf("record %d of %d: %v", i, len(recs), err)
		}
	}
}

// writeSizes records the size of every produce request written.
type writeSizes struct{ largest atomic.Int64 }

func (w *writeSizes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Produce) && int64(n) > w.largest.Load() {
		w.largest.Store(int64(n))
	}
}

// A produce request holds about one record batch, not one batch of every
// partition (kgo builds a request in one pooled buffer, which stayed the
// size of the largest request), and a record of MaxMessageBytes still
// goes out in a batch of its own.
func TestProduceRequestsHoldOneBatch(t *testing.T) {
	t.Parallel()
	const maxMessage = 100_000
	k := testenv.NewKafka(t, kfake.SeedTopics(8, "t"))
	sizes := &writeSizes{}
	p := newProducer(t, k, func(c *producer.Config) {
		c.MaxMessageBytes = maxMessage
		c.MaxBufferedBytes = 64 << 20
		c.Hooks = []kgo.Hook{sizes}
	})
	recs := make([]*kgo.Record, 2000)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Key: []byte(strconv.Itoa(i)), Value: make([]byte, 1000)}
	}
	big := maxMessage - 100
	recs = append(recs, &kgo.Record{Topic: "t", Key: []byte("big"), Value: make([]byte, big)})
	for i, err := range produce(t, p, recs...) {
		if err != nil {
			t.Fatalf("record %d of %d: %v", i, len(recs), err)
		}
	}
	// The topic's limit (kfake: 1 MiB) is above MaxMessageBytes: batches
	// are cut at the request's limit, MaxMessageBytes and 4 KiB of record
	// overhead, plus 16 KiB for the request.
	if limit := int64(maxMessage + 4096 + 16<<10); sizes.largest.Load() > limit || sizes.largest.Load() < int64(big) {
		t.Errorf("largest produce request %d bytes, want %d to %d (2 MB of records in 8 partitions)", sizes.largest.Load(), big, limit)
	}
}

// A broker answering NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT and
// NOT_ENOUGH_REPLICAS to produce requests mid-stream costs neither a
// record nor the order of a partition: the client retries, and the
// idempotent producer writes each record once.
func TestRetriableErrorsKeepOrder(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.SeedTopics(3, "order"))
	var n atomic.Int32
	codes := []int16{6, 7, 19} // NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS
	var refused atomic.Int32
	k.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		i := n.Add(1)
		if i%3 != 0 || i > 30 {
			return nil, nil, false
		}
		refused.Add(1)
		code := codes[int(i/3)%len(codes)]
		return testenv.ProduceErrors(req.(*kmsg.ProduceRequest), func(string) int16 { return code }), nil, true
	})
	p := newProducer(t, k, nil)
	const keys, perKey = 5, 40
	for round := range perKey {
		var recs []*kgo.Record
		for key := range keys {
			recs = append(recs, &kgo.Record{Topic: "order", Key: fmt.Appendf(nil, "k%d", key), Value: fmt.Appendf(nil, "%d", round)})
		}
		for i, err := range produce(t, p, recs...) {
			if err != nil {
				t.Fatalf("round %d record %d: %v", round, i, err)
			}
		}
	}
	if refused.Load() == 0 {
		t.Fatal("the broker refused no produce request; the test wants some")
	}
	got := testenv.WaitForRecords(t, k.Brokers, "order", keys*perKey, 30*time.Second)
	next := make(map[string]int)
	for _, r := range got {
		if want := fmt.Sprint(next[string(r.Key)]); string(r.Value) != want {
			t.Fatalf("key %s: record %s where %s comes next (a loss, a duplicate or a reorder)", r.Key, r.Value, want)
		}
		next[string(r.Key)]++
	}
	if len(got) != keys*perKey {
		t.Fatalf("%d records, want %d", len(got), keys*perKey)
	}
}

// While the guard fails, nothing reaches the broker; once it passes, the
// record is written.
func TestGuardCoversEveryWrite(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	var produced atomic.Int32
	k.Cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		produced.Add(1)
		return nil, nil, false
	})
	var stale atomic.Bool
	stale.Store(true)
	var asked atomic.Int32
	errStale := errors.New("stale")
	var requests atomic.Int32
	k.Cluster.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		requests.Add(1)
		return nil, nil, false
	})
	p := newProducer(t, k, func(c *producer.Config) {
		c.Guard = func() error {
			asked.Add(1)
			if stale.Load() {
				return errStale
			}
			return nil
		}
	})
	done := make(chan []error, 1)
	go func() {
		errs, _ := p.Produce(context.Background(), []*kgo.Record{{Topic: "guarded", Key: []byte("k"), Value: []byte("v")}})
		done <- errs
	}()
	testenv.WaitFor(t, 30*time.Second, "the guard asked several times", func() (bool, error) { return asked.Load() >= 3, nil })
	if n := requests.Load(); n != 0 {
		t.Fatalf("the broker received %d requests while the guard failed, want 0", n)
	}
	stale.Store(false)
	select {
	case errs := <-done:
		if errs[0] != nil {
			t.Fatalf("record: %v", errs[0])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the record was not written after the guard passed")
	}
	if produced.Load() == 0 {
		t.Fatal("no produce request")
	}
}

// SASL PLAIN and SCRAM authenticate against a broker that requires them;
// with a wrong password nothing is written (kfake closes the connection,
// which the client retries; a Kafka broker answers
// SASL_AUTHENTICATION_FAILED, which fails the records).
func TestSASL(t *testing.T) {
	t.Parallel()
	mechanisms := map[string]func(user, pass string) sasl.Mechanism{
		"PLAIN":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
		"SCRAM-SHA-256": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
		"SCRAM-SHA-512": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() },
	}
	for mech, auth := range mechanisms {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "relay", "s3cret"))
			for _, pass := range []string{"s3cret", "wrong"} {
				p := newProducer(t, k, func(c *producer.Config) {
					c.SASL = auth("relay", pass)
				})
				if pass == "s3cret" {
					if errs := produce(t, p, &kgo.Record{Topic: "sasl", Key: []byte("k"), Value: []byte("v")}); errs[0] != nil {
						t.Fatalf("with the right password: %v", errs[0])
					}
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				errs, err := p.Produce(ctx, []*kgo.Record{{Topic: "sasl", Key: []byte("k2"), Value: []byte("v")}})
				cancel()
				if err == nil && errs[0] == nil {
					t.Fatal("with a wrong password: the record was written")
				}
			}
		})
	}
}

// Ping answers with the configuration's credentials.
func TestPing(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "relay", "s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok := producer.Config{Brokers: k.Brokers, SASL: plain.Auth{User: "relay", Pass: "s3cret"}.AsMechanism()}
	if err := producer.Ping(ctx, ok); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	bad := ok
	bad.SASL = plain.Auth{User: "relay", Pass: "wrong"}.AsMechanism()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := producer.Ping(ctx, bad); err == nil {
		t.Fatal("Ping with a wrong password: no error")
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:1"}, Compression: "brotli"}); err == nil {
		t.Error("compression brotli: no error")
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
