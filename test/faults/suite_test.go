package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// Environment variables of the suite (make test-faults sets the first).
const (
	// enableEnv runs the suite ("1"); without it every test skips.
	enableEnv = "PGOUTBOX_TEST_FAULTS"
	// runsEnv is how many runs of each fault kind and transaction
	// version. Defaults to 2.
	runsEnv = "PGOUTBOX_FAULTS_RUNS"
	// tableEnv names a file the results table is written to (Markdown).
	tableEnv = "PGOUTBOX_FAULTS_TABLE"
)

// suite is what every run shares: the relay binary, the Postgres server,
// the Apache Kafka node and the proxy in front of it.
type suite struct {
	bin    string
	server *testenv.Server
	kafka  *testenv.ApacheKafka
	proxy  *cutProxy
	seq    int
}

// newSuite skips t unless the suite is enabled, then builds the relay and
// starts Postgres and Kafka (with the proxied listener) for the whole test.
func newSuite(t *testing.T) *suite {
	t.Helper()
	if os.Getenv(enableEnv) != "1" {
		t.Skipf("fault suite on Apache Kafka (minutes, a JVM, SIGKILLs): runs with %s=1 (make test-faults)", enableEnv)
	}
	s := &suite{bin: buildRelay(t, t.TempDir())}
	s.server = testenv.SharedServer(t)
	s.proxy = newCutProxy(t)
	t.Cleanup(s.proxy.close)
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s.kafka, err = testenv.StartApacheKafkaWith(ctx, testenv.ApacheKafkaOptions{
		Listener: &testenv.ProxiedListener{Port: ports[0], Advertised: s.proxy.addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kafka.Stop)
	s.proxy.start(fmt.Sprintf("127.0.0.1:%d", ports[0]))
	return s
}

// runs is the number of runs per fault kind and transaction version.
func runs(t *testing.T) int {
	n := 2
	if v := os.Getenv(runsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", runsEnv, v)
		}
	}
	return n
}

// setTransactionVersion sets the cluster's finalized transaction.version
// feature and checks the broker reports it.
func (s *suite) setTransactionVersion(t *testing.T, level int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cur := transactionVersion(ctx, t, cl); cur != level {
		upgrade := int8(1) // upgrade; 2 is a safe downgrade
		if level < cur {
			upgrade = 2
		}
		t.Logf("transaction.version %d -> %d", cur, level)
		res, err := kadm.NewClient(cl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: upgrade})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("set transaction.version %d (from %d): %v", level, cur, err)
		}
	}
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("transaction.version %d finalized", level), func() (bool, error) {
		return transactionVersion(ctx, t, cl) == level, nil
	})
}

// transactionVersion is the finalized transaction.version of the cluster
// (ApiVersions), 0 when not finalized.
func transactionVersion(ctx context.Context, t *testing.T, cl *kgo.Client) int16 {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("api versions: %v", err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// faultKind is one kind of fault: inject runs it on a run whose relay
// streams, as many times as the kind says.
type faultKind struct {
	name   string
	doc    string
	inject func(t *testing.T, r *run) int // returns the faults injected
}

// TestFaults runs every fault kind under transaction.version 1 and 2,
// runs(t) times each, and asserts that a read_committed reader sees every
// committed row once, in commit order per key, nothing rolled back or
// aborted, no DB transaction in part, and no record of a fenced relay
// after its successor's. It logs the table of results and writes it to
// $PGOUTBOX_FAULTS_TABLE.
func TestFaults(t *testing.T) {
	s := newSuite(t)
	n := runs(t)
	tab := newTable()
	t.Cleanup(func() { tab.report(t) })
	for _, kind := range faultKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Log(kind.doc)
			for _, tv := range []int16{1, 2} {
				t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
					s.setTransactionVersion(t, tv)
					for i := range n {
						t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) {
							var (
								r      *run
								res    result
								faults int
							)
							t.Cleanup(func() { // a run that stopped early counts too, as failed
								restarts := 0
								if r != nil {
									restarts = r.restarts
								}
								tab.add(kind.name, tv, faults, restarts, res, t.Failed())
							})
							r = s.newRun(t)
							faults = kind.inject(t, r)
							res = r.finish(t)
							t.Logf("%s tv%d: %d faults; %v", kind.name, tv, faults, res)
							if res.lost+res.duplicated+res.abortedReads+res.torn+res.orderBreaks+res.stale+res.openTxns > 0 {
								t.Errorf("%s tv%d: %v; want 0 lost, duplicated, aborted reads, torn, order breaks, stale, open", kind.name, tv, res)
							}
						})
					}
				})
			}
		})
	}
}

// newRunDir is a directory for one run's logs, kept under the test's
// temporary directory.
func newRunDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
