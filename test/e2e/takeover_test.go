package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// probe is a relay's metrics endpoint.
type probe struct {
	addr   string
	client *http.Client
}

// ready returns the status code of /readyz, or 0 when nothing answers.
func (p probe) ready() int { return p.status("/readyz") }

// status returns the status code of path, or 0 when nothing answers.
func (p probe) status(path string) int {
	resp, err := p.client.Get("http://" + p.addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// metric returns the sum of the samples of name with the given label
// text (e.g. `slot="x"`) on /metrics; ok is false when absent or
// unreachable. A sum, not the first sample: events_published_total has a
// series per topic, the dead-letter topic's (0) from the start.
func (p probe) metric(name, labels string) (v float64, ok bool) {
	resp, err := p.client.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if labels != "" && !strings.Contains(line, labels) {
			continue
		}
		f := strings.Fields(line)
		x, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, false
		}
		v, ok = v+x, true
	}
	return v, ok
}

// waitReady waits until /readyz of p answers 200 (what names the wait);
// pr exiting first fails t.
func waitReady(t *testing.T, what string, pr *relayProc, p probe) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, what, func() (bool, error) {
		if pr.exited() {
			return false, fmt.Errorf("relay exited: %v", pr.err)
		}
		return p.ready() == http.StatusOK, nil
	})
}

// relayPair is what two relay processes on one slot share: the binary, a
// database where relay setup ran, a broker, and per relay a log file and a
// metrics probe.
type relayPair struct {
	bin        string
	db         *testenv.DB
	kafka      *testenv.Kafka
	slot       string
	common     []string // --slot and --publication
	logA, logB string
	a, b       probe
}

// setupRelayPair builds the relay, runs relay setup for publication and,
// when the test fails, logs the tails of both logs under nameA and nameB.
func setupRelayPair(t *testing.T, publication, nameA, nameB string) *relayPair {
	t.Helper()
	rp := &relayPair{bin: buildRelay(t), db: testenv.NewDB(t), kafka: testenv.NewBroker(t)}
	dir := t.TempDir()
	rp.logA, rp.logB = filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	rp.slot = rp.db.Name
	rp.common = []string{"--slot", rp.slot, "--publication", publication}
	mustRunRelay(t, rp.bin, append([]string{"setup", "--database-url", rp.db.URL}, rp.common...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s\n%s log:\n%s", nameA, logTail(rp.logA), nameB, logTail(rp.logB))
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	rp.a, rp.b = probe{freeAddr(t), hc}, probe{freeAddr(t), hc}
	return rp
}

// TestStandbyTakesOver runs two relay processes on one slot: the second
// waits as a standby (not ready, leader 0, serving the slot metrics) and,
// when the first is SIGKILLed while writers commit, takes over within a
// few seconds; Kafka ends up with every committed message.
func TestStandbyTakesOver(t *testing.T) {
	t.Parallel()
	rp := setupRelayPair(t, "pub_takeover", "active relay", "standby relay")
	bin, db, kafka, slot, common := rp.bin, rp.db, rp.kafka, rp.slot, rp.common
	logA, logB, a, b := rp.logA, rp.logB, rp.a, rp.b
	run := func(p probe, log string) *relayProc {
		return startRelay(t, bin, log, append(append([]string{"run", "--database-url", db.URL}, common...),
			"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate), "--metrics-addr", p.addr, "--log-format", "json",
			"--status-interval", "500ms", "--lag-poll-interval", "200ms", "--standby-retry-interval", "500ms",
			"--heartbeat-interval", "200ms")...)
	}
	slotLabel := `slot="` + slot + `"`

	pa := run(a, logA)
	waitReady(t, "the first relay ready", pa, a)
	pb := run(b, logB)
	standbySince := time.Now()
	testenv.WaitFor(t, time.Minute, "the second relay serving metrics as a standby", func() (bool, error) {
		if pb.exited() {
			return false, fmt.Errorf("second relay exited: %v", pb.err)
		}
		active, ok := b.metric("pgoutbox_relay_slot_active", slotLabel)
		return ok && active == 1, nil
	})
	if code := b.ready(); code != http.StatusServiceUnavailable {
		t.Errorf("standby /readyz = %d, want 503", code)
	}
	// The Helm chart's readiness probe: a waiting standby is ready there.
	testenv.WaitFor(t, time.Minute, "the standby ready as a standby (/readyz?standby=ok)", func() (bool, error) {
		return b.status("/readyz?standby=ok") == http.StatusOK, nil
	})
	if code := a.status("/readyz?standby=ok"); code != http.StatusOK {
		t.Errorf("active relay /readyz?standby=ok = %d, want 200", code)
	}
	if v, ok := b.metric("pgoutbox_relay_leader", slotLabel); !ok || v != 0 {
		t.Errorf("standby leader = %v (present %v), want 0", v, ok)
	}
	if v, ok := a.metric("pgoutbox_relay_leader", slotLabel); !ok || v != 1 {
		t.Errorf("active relay leader = %v (present %v), want 1", v, ok)
	}

	// Writers commit throughout; the active relay publishes.
	l := newLedger()
	stopWriters := startWriters(t, db.Pool, l)
	testenv.WaitFor(t, time.Minute, "the active relay publishing", func() (bool, error) {
		v, _ := a.metric("pgoutbox_relay_events_published_total", "")
		return v > 0, nil
	})
	committed := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }
	// Let the standby retry a few times (every 500ms) while the writers
	// commit, to check it logs its wait once and counts no reconnects.
	testenv.WaitFor(t, time.Minute, "writers committing while the standby retries", func() (bool, error) {
		return committed() >= 1000 && time.Since(standbySince) > 2500*time.Millisecond, nil
	})
	testenv.WaitFor(t, time.Minute, "the standby's log line", func() (bool, error) {
		return strings.Count(readFile(t, logB), "waiting as a standby") > 0, nil
	})
	for _, name := range []string{"pgoutbox_relay_lag_seconds", "pgoutbox_relay_seconds_since_last_ack"} {
		if v, ok := b.metric(name, slotLabel); !ok || v != 0 {
			t.Errorf("standby %s = %v (present %v), want 0 (the active relay reports it)", name, v, ok)
		}
	}
	t.Logf("standby waited %v before the kill", time.Since(standbySince).Round(time.Millisecond))

	pa.kill()
	killed := time.Now()
	waitReady(t, "the standby ready", pb, b)
	ready := time.Since(killed)
	testenv.WaitFor(t, time.Minute, "the standby publishing", func() (bool, error) {
		v, _ := b.metric("pgoutbox_relay_events_published_total", "")
		return v > 0, nil
	})
	publishing := time.Since(killed)
	t.Logf("takeover after SIGKILL: ready in %v, first record published in %v", ready.Round(time.Millisecond), publishing.Round(time.Millisecond))
	if v, _ := b.metric("pgoutbox_relay_leader", slotLabel); v != 1 {
		t.Errorf("leader = %v after the takeover, want 1", v)
	}
	logged := readFile(t, logB)
	if n := strings.Count(logged, "waiting as a standby"); n != 1 {
		t.Errorf("standby logged %d times that it waits, want once", n)
	}
	if strings.Contains(logged, "reconnecting") {
		t.Error("standby logged its waits as reconnects")
	}
	if v, _ := b.metric("pgoutbox_relay_reconnects_total", ""); v != 0 {
		t.Errorf("reconnects_total = %v on the standby, want 0", v)
	}
	if !strings.Contains(logged, "took over the slot") {
		t.Error("the standby did not log the takeover")
	}

	// A little more writing on the new relay, then everything must be in
	// Kafka.
	target := committed() + 200
	testenv.WaitFor(t, time.Minute, "writers going on after the takeover", func() (bool, error) { return committed() >= target, nil })
	stopWriters()
	var want []uuid.UUID
	for _, ids := range l.committed {
		want = append(want, ids...)
	}
	var missing int
	testenv.WaitFor(t, 2*time.Minute, "every committed message in Kafka", func() (bool, error) {
		seen := make(map[uuid.UUID]bool)
		for _, typ := range crashAggregateTypes {
			recs, err := testenv.ReadTopic(context.Background(), kafka.Brokers, kafka.Topic("outbox."+typ))
			if err != nil {
				return false, err
			}
			for _, rec := range recs {
				h, _ := rec.Header("message-id")
				id, _ := uuid.Parse(h)
				seen[id] = true
			}
		}
		missing = 0
		for _, id := range want {
			if !seen[id] {
				missing++
			}
		}
		return missing == 0, nil
	})
	t.Logf("%d committed messages, all in Kafka", len(want))
	if v, _ := b.metric("pgoutbox_relay_invalid_events_total", ""); v != 0 {
		t.Errorf("%v invalid events (heartbeats taken for events?)", v)
	}
	if code := pb.stop(time.Minute); code != 0 {
		t.Errorf("standby-turned-active relay after SIGTERM: exit %d, want 0", code)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPausedLeaderPublishesNothingAfterTakeover freezes the active relay
// (SIGSTOP) for longer than wal_sender_timeout while writers commit: the
// server ends its walsender, the standby takes the slot over and
// publishes. Then the old leader resumes (SIGCONT) with events in its
// socket buffer and its queue. It must write none of them: in every
// partition, no record of the old leader (told apart by the relay-instance
// header, --instance-id) follows one of the new leader, and the last copy
// of each aggregate's messages is in commit order.
func TestPausedLeaderPublishesNothingAfterTakeover(t *testing.T) {
	t.Parallel()
	pr := pauseLeader(t, "pub_paused", false)
	testenv.WaitFor(t, time.Minute, "the old leader turned standby", func() (bool, error) {
		if pr.pa.exited() {
			return false, fmt.Errorf("old leader exited: %v", pr.pa.err)
		}
		return strings.Contains(readFile(t, pr.rp.logA), "waiting as a standby"), nil
	})
	if v, ok := pr.rp.a.metric("pgoutbox_relay_leader", `slot="`+pr.rp.slot+`"`); !ok || v != 0 {
		t.Errorf("old leader: leader = %v (present %v), want 0", v, ok)
	}
	pr.finish(t, pr.pa, pr.pb)
}

// pausedSenderTimeout is the wal_sender_timeout of pauseLeader's relays:
// longer than testSenderTimeout, because the check of finish holds only if
// the new leader keeps the slot, and at 2 s (a liveness bound of 1 s) a
// new leader stalled 2.8 s on a loaded CI machine lost it to the resumed
// one. Its liveness bound is 3 s.
const pausedSenderTimeout = 6 * time.Second

// pausedRun is a takeover from a frozen leader (see pauseLeader).
type pausedRun struct {
	rp          *relayPair
	pa, pb      *relayProc // the frozen (and resumed) leader; the standby that took over
	l           *ledger
	stopWriters func()
	// kcatProps are librdkafka properties for the final read.
	kcatProps []string
}

// pauseLeader runs relays a and b on one slot with extra flags (a leads,
// b waits as a standby) while writers commit, freezes a (SIGSTOP) until b
// took over and published, and resumes a (SIGCONT). The writers go on.
// With atCommit (exactly-once relays) a is frozen as it commits a Kafka
// transaction, which stays open (on an external broker, whenever it is).
func pauseLeader(t *testing.T, publication string, atCommit bool, extra ...string) *pausedRun {
	t.Helper()
	rp := setupRelayPair(t, publication, "old leader", "new leader")
	bin, db, kafka, common := rp.bin, rp.db, rp.kafka, rp.common
	logA, logB, a, b := rp.logA, rp.logB, rp.a, rp.b
	relayURL := testenv.WithSenderTimeout(t, db.URL, pausedSenderTimeout)
	run := func(p probe, log, instance string) *relayProc {
		return startRelay(t, bin, log, append(append(append([]string{"run", "--database-url", relayURL}, common...),
			"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate), "--metrics-addr", p.addr, "--log-format", "json", "--instance-id", instance,
			"--lag-poll-interval", "200ms", "--standby-retry-interval", "200ms",
			// A short queue: after the freeze, the reader waits for the
			// sink to write what it reads from the socket buffer (as
			// under load) instead of reaching the end of the stream
			// first.
			"--batch-size", "50"), extra...)...)
	}
	pa := run(a, logA, "a")
	waitReady(t, "the first relay ready", pa, a)
	pb := run(b, logB, "b")
	testenv.WaitFor(t, time.Minute, "the second relay waiting as a standby", func() (bool, error) {
		if pb.exited() {
			return false, fmt.Errorf("second relay exited: %v", pb.err)
		}
		return strings.Contains(readFile(t, logB), "waiting as a standby"), nil
	})

	l := newLedger()
	stopWriters := startWriters(t, db.Pool, l)
	committed := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }
	testenv.WaitFor(t, time.Minute, "the leader publishing", func() (bool, error) {
		v, _ := a.metric("pgoutbox_relay_events_published_total", "")
		if atCommit {
			// a's first Kafka transaction must have committed before the
			// freeze, or a may have no record to show (b aborts the open
			// one). Acknowledged is not committed: on a real broker the
			// freeze comes at any point and its first EndTxn is slow;
			// on kfake the freeze is at a's next EndTxn, which under
			// load can be its first.
			p, _ := a.metric("pgoutbox_relay_progress_lsn", "")
			v = min(v, p)
		}
		return v > 0 && committed() >= 1000, nil
	})

	if atCommit && kafka.Cluster != nil {
		// The broker drops a's next EndTxn and freezes a meanwhile: a
		// stops with a Kafka transaction open, its records written.
		var frozen atomic.Bool
		kafka.Cluster.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
			frozen.Store(pa.cmd.Process.Signal(syscall.SIGSTOP) == nil)
			return nil, errors.New("test: the leader froze before its commit reached the broker"), true
		})
		testenv.WaitFor(t, time.Minute, "the leader frozen at a commit", func() (bool, error) { return frozen.Load(), nil })
	} else if err := pa.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = pa.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	waitReady(t, "the standby taking over", pb, b)
	took := time.Since(stopped)
	var published float64
	testenv.WaitFor(t, time.Minute, "the new leader publishing", func() (bool, error) {
		published, _ = b.metric("pgoutbox_relay_events_published_total", "")
		return published >= 500, nil
	})
	resume()
	t.Logf("old leader frozen %v (wal_sender_timeout %v); the standby was ready after %v", time.Since(stopped).Round(time.Millisecond),
		pausedSenderTimeout, took.Round(time.Millisecond))
	return &pausedRun{rp: rp, pa: pa, pb: pb, l: l, stopWriters: stopWriters}
}

// finish lets the writers commit a little more, stops them, waits until
// one of the running relays confirmed everything, and checks Kafka: no
// record of the old leader after the new leader's first in a partition,
// the last copy of each aggregate's messages in commit order, none
// missing. The running relays must then stop with exit code 0. It returns
// the number of duplicate records.
func (pr *pausedRun) finish(t *testing.T, running ...*relayProc) (duplicates int) {
	t.Helper()
	rp, l := pr.rp, pr.l
	committed := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }
	target := committed() + 500
	testenv.WaitFor(t, time.Minute, "writers going on after the takeover", func() (bool, error) { return committed() >= target, nil })
	pr.stopWriters()
	endLSN := writeFence(t, rp.db.Pool, l)
	waitConfirmed(t, rp.db.Pool, rp.slot, endLSN, running...)
	// The check below attributes every record of "a" after the takeover
	// to the paused session: the old leader must not have streamed again
	// (which it would, legitimately, had the new leader lost the slot).
	if n := strings.Count(readFile(t, rp.logA), `"msg":"streaming"`); n != 1 {
		t.Fatalf("the old leader streamed %d times, want once: the new leader lost the slot (log: %d interruptions)",
			n, strings.Count(readFile(t, rp.logB), "replication interrupted"))
	}

	type partition struct {
		topic string
		n     int32
	}
	firstB := make(map[partition]int64) // offset of the new leader's first record
	stale := make(map[partition]int)    // old leader's records after it
	last := make(map[uuid.UUID]int)     // position of the last copy, in its aggregate's partition order
	byInstance := map[string]int{}
	records := 0
	for _, typ := range crashAggregateTypes {
		for i, rec := range mustReadTopic(t, rp.kafka, "outbox."+typ, pr.kcatProps...) {
			records++
			inst, _ := rec.Header("relay-instance")
			byInstance[inst]++
			p := partition{rec.Topic, rec.Partition}
			switch first, ok := firstB[p]; {
			case inst == "b" && !ok:
				firstB[p] = rec.Offset
			case inst == "a" && ok && rec.Offset > first:
				stale[p]++
			}
			h, _ := rec.Header("message-id")
			id, _ := uuid.Parse(h)
			last[id] = i // records come in partition, offset order
		}
	}
	t.Logf("records by relay-instance: %v", byInstance)
	if byInstance["a"] == 0 || byInstance["b"] == 0 || len(byInstance) != 2 {
		t.Errorf("records by relay-instance = %v, want both a and b and nothing else", byInstance)
	}
	for p, n := range stale {
		t.Errorf("%s/%d: %d records of the old leader after the new leader's first (offset %d)", p.topic, p.n, n, firstB[p])
	}
	missing := 0
	for agg, ids := range l.committed {
		prev := -1
		for _, id := range ids {
			pos, ok := last[id]
			if !ok {
				missing++
				continue
			}
			if pos < prev {
				t.Errorf("aggregate %s: the last copy of %s precedes the last copy of a message committed before it", agg, id)
				break
			}
			prev = pos
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed messages missing from Kafka", missing, l.count)
	}
	duplicates = records - len(last)
	t.Logf("%d committed messages, all in Kafka; %d records by the new leader; %d duplicates", l.count, byInstance["b"], duplicates)
	for _, p := range running {
		if code := p.stop(time.Minute); code != 0 {
			t.Errorf("relay after SIGTERM: exit %d, want 0", code)
		}
	}
	return duplicates
}
