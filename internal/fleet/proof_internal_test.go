package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// owned records the partitions a member of a spread group owns.
type owned struct {
	mu sync.Mutex
	ps []int32
}

func (o *owned) set(ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ps = slices.Clone(ps)
}

func (o *owned) get() []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ps)
}

// spreadFixture is a spread group of four sources on a broker, and
// replicas of the fleet joining it.
type spreadFixture struct {
	kafka   *testenv.Kafka
	sources []Source
	sp      *spread
}

func newSpreadFixture(t *testing.T, kafka *testenv.Kafka, group, secret string) *spreadFixture {
	f := &spreadFixture{kafka: kafka, sp: &spread{group: kafka.Topic(group), sessionTimeout: 6 * time.Second, secret: secret}}
	for i := range 4 {
		f.sources = append(f.sources, Source{Name: fmt.Sprintf("s%d", i), Config: &relay.Config{Kafka: relay.KafkaConfig{Brokers: kafka.Brokers}}})
	}
	return f
}

// replica joins the group as a relay of the fleet; its log goes to logs.
func (f *spreadFixture) replica(t *testing.T, logs *testenv.SyncBuffer) *owned {
	t.Helper()
	o, _ := f.replicaMember(t, logs, 0, 0)
	return o
}

// replicaMember is replica with its membership, which describes the
// group every so often and counts a source held by no relay after grace
// (0: the defaults).
func (f *spreadFixture) replicaMember(t *testing.T, logs *testenv.SyncBuffer, every, grace time.Duration) (*owned, *member) {
	t.Helper()
	o := &owned{}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := join(ctx, f.sp, f.sources, slog.New(slog.NewTextHandler(logs, nil)), o.set, func(m *member) { m.held.every, m.held.grace = every, grace })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); m.close() })
	return o, m
}

// foreign joins the group as kcat -G does: a plain Kafka consumer of the
// group's topic, with the relays' protocol name (cooperative-sticky). It
// returns what it owns and its client, which the caller may close.
func (f *spreadFixture) foreign(t *testing.T) (*owned, *kgo.Client) {
	t.Helper()
	o := &owned{}
	topic := f.sp.topic()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka.Brokers...), kgo.ConsumerGroup(f.sp.group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { o.set(append(o.get(), ps[topic]...)) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			o.set(slices.DeleteFunc(o.get(), func(p int32) bool { return slices.Contains(ps[topic], p) }))
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { o.set(nil) }))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for !cl.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	t.Cleanup(cl.Close)
	return o, cl
}

// createTopic creates the group's topic, as the first replica would.
func (f *spreadFixture) createTopic(t *testing.T) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m := &member{sp: f.sp, logger: slog.Default(), adm: kadm.NewClient(cl)}
	if err := m.ensurePartitions(context.Background(), len(f.sources)); err != nil {
		t.Fatal(err)
	}
}

// stable waits until the group has members members, stable.
func (f *spreadFixture) stable(t *testing.T, members int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("group %s stable with %d members", f.sp.group, members), func() (bool, error) {
		gs, err := adm.DescribeGroups(context.Background(), f.sp.group)
		if err != nil {
			return false, nil
		}
		g := gs[f.sp.group]
		return g.State == "Stable" && len(g.Members) == members, nil
	})
}

// A foreign member of the spread group, a plain Kafka client with the
// relays' protocol name, takes sources from a fleet without a secret.
// With one (spread: secret-file:), a replica's leader gives it none; and
// when the foreign client leads the group, the replica refuses its
// assignment (it cannot prove it holds the secret) until a relay leads.
func TestSpreadRefusesAForeignMember(t *testing.T) {
	kafka := testenv.NewBroker(t)
	const secret = "0123456789abcdef0123456789abcdef"

	t.Run("without a secret, a foreign member takes sources", func(t *testing.T) {
		f := newSpreadFixture(t, kafka, "open", "")
		var logs testenv.SyncBuffer
		r := f.replica(t, &logs)
		testenv.WaitFor(t, time.Minute, "the replica owns the four sources", func() (bool, error) { return len(r.get()) == 4, nil })
		fo, _ := f.foreign(t)
		testenv.WaitFor(t, time.Minute, "the foreign member owns sources", func() (bool, error) { return len(fo.get()) > 0, nil })
		if len(r.get())+len(fo.get()) != 4 {
			t.Errorf("replica %v, foreign %v", r.get(), fo.get())
		}
	})

	t.Run("a foreign member is given no source", func(t *testing.T) {
		f := newSpreadFixture(t, kafka, "member", secret)
		var logs testenv.SyncBuffer
		r := f.replica(t, &logs)
		testenv.WaitFor(t, time.Minute, "the replica owns the four sources", func() (bool, error) { return len(r.get()) == 4, nil })
		fo, _ := f.foreign(t)
		testenv.WaitFor(t, time.Minute, "the leader balances with the foreign member", func() (bool, error) {
			return strings.Contains(logs.String(), "without proof of the fleet secret") || len(fo.get()) > 0, nil
		})
		f.stable(t, 2)
		if got := r.get(); len(got) != 4 || len(fo.get()) != 0 {
			t.Errorf("replica %v, foreign %v: want all four on the replica\n%s", got, fo.get(), logs.String())
		}
	})

	t.Run("a foreign leader's assignment is refused", func(t *testing.T) {
		f := newSpreadFixture(t, kafka, "leader", secret)
		f.createTopic(t)
		fo, cl := f.foreign(t)
		testenv.WaitFor(t, time.Minute, "the foreign client leads and owns the four sources", func() (bool, error) { return len(fo.get()) == 4, nil })
		var logs testenv.SyncBuffer
		r := f.replica(t, &logs)
		testenv.WaitFor(t, time.Minute, "the replica gets the foreign leader's assignment", func() (bool, error) {
			return strings.Contains(logs.String(), "carries no proof of the fleet secret") || len(r.get()) > 0, nil
		})
		if got := r.get(); len(got) != 0 {
			t.Errorf("the replica owns %v from a foreign leader\n%s", got, logs.String())
		}
		cl.Close() // the foreign client leaves: the replica leads
		testenv.WaitFor(t, time.Minute, "the replica owns the four sources once a relay leads", func() (bool, error) { return len(r.get()) == 4, nil })
	})
}

// spread: secret-file: is read as a secret file (a regular file under the
// size cap), of at least minSecret bytes, and watched with the file; a
// spread without one is warned about at start.
func TestSpreadSecretFile(t *testing.T) {
	good := testenv.TempFile(t, "secret", "0123456789abcdef0123\n")
	short := testenv.TempFile(t, "short", "0123\n")
	const sources = "sources:\n  - name: a\n    database-url: postgres://u@db:5432/a\n    brokers: [k:9092]\n"
	fc, err := Load(writeFleet(t, "spread:\n  group: g\n  secret-file: "+good+"\n"+sources), testParser())
	if err != nil {
		t.Fatal(err)
	}
	if fc.Spread.secret != "0123456789abcdef0123" || !slices.Contains(fc.secrets, good) {
		t.Errorf("secret %q, watched %v", fc.Spread.secret, fc.secrets)
	}
	// A new secret is a change of spread:, which needs a restart: the
	// running replica keeps its sources and its secret.
	path := writeFleet(t, "spread:\n  group: g\n  secret-file: "+good+"\n"+sources)
	running, err := Load(path, testParser())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("fedcba9876543210fedcba\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&fleet{}).tryReload(path, testParser(), running); err == nil || !strings.Contains(err.Error(), "spread: changes need a restart") {
		t.Errorf("a reload with a new fleet secret: %v", err)
	}
	for _, tc := range []struct{ file, want string }{
		{short, "needs at least 16"},
		{"/nonexistent/secret", "/nonexistent/secret"},
		{"/dev/zero", "not a regular file"},
	} {
		_, err := Load(writeFleet(t, "spread:\n  group: g\n  secret-file: "+tc.file+"\n"+sources), testParser())
		if err == nil || !strings.Contains(err.Error(), "spread: secret-file: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("secret-file %s: %v, want %q", tc.file, err, tc.want)
		}
	}

	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	fc.Spread.warnWithoutSecret(logger)
	(*spread)(nil).warnWithoutSecret(logger)
	if logs.Len() != 0 {
		t.Errorf("warned with a secret, or without spread: %s", logs.String())
	}
	(&spread{group: "g"}).warnWithoutSecret(logger)
	if !strings.Contains(logs.String(), "no secret-file") {
		t.Errorf("no warning without a secret: %q", logs.String())
	}
}

// A source that a client of the group other than a relay holds is
// elsewhere on every replica, and streamed by none: after the grace,
// /readyz fails on the replica (as on every other) naming it, and passes
// again once a relay holds it. With a secret, a foreign leader whose
// assignment the replicas refuse leaves every source held by no relay.
func TestReadyzFailsWhenNoRelayHoldsASource(t *testing.T) {
	kafka := testenv.NewBroker(t)
	readyz := func(f *fleet) (int, string) {
		rec := httptest.NewRecorder()
		f.handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		name, secret string
		leader       bool // the foreign client joins first and leads
	}{{"foreign member", "", false}, {"foreign leader", "0123456789abcdef0123456789abcdef", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sf := newSpreadFixture(t, kafka, strings.ReplaceAll(tc.name, " ", "-"), tc.secret)
			var cl *kgo.Client
			if tc.leader {
				sf.createTopic(t)
				var fo *owned
				fo, cl = sf.foreign(t)
				testenv.WaitFor(t, time.Minute, "the foreign client leads", func() (bool, error) { return len(fo.get()) == 4, nil })
			}
			var logs testenv.SyncBuffer
			r, m := sf.replicaMember(t, &logs, 100*time.Millisecond, time.Second)
			// The replica runs no source here (no database): what it owns
			// is elsewhere to /status, as the others' sources are.
			f := &fleet{sources: map[string]*source{}, shared: relay.NewSharedBuffer(1 << 20), process: prometheus.NewRegistry(),
				spread: true, joined: true, loaded: true, desired: sf.sources, member: m}
			if !tc.leader {
				testenv.WaitFor(t, time.Minute, "the replica owns the four sources", func() (bool, error) { return len(r.get()) == 4, nil })
				if code, body := readyz(f); code != http.StatusOK {
					t.Fatalf("/readyz %d %s with every source held by the replica", code, body)
				}
				var fo *owned
				fo, cl = sf.foreign(t)
				testenv.WaitFor(t, time.Minute, "the foreign member owns sources", func() (bool, error) { return len(fo.get()) > 0, nil })
			}
			testenv.WaitFor(t, time.Minute, "/readyz fails", func() (bool, error) {
				code, body := readyz(f)
				return code == http.StatusServiceUnavailable && strings.Contains(body, "no relay of the fleet holds it"), nil
			})
			cl.Close()
			testenv.WaitFor(t, time.Minute, "/readyz passes once the replica holds every source", func() (bool, error) {
				code, _ := readyz(f)
				return code == http.StatusOK && len(r.get()) == 4, nil
			})
		})
	}
}
