package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
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
func (p probe) ready() int {
	resp, err := p.client.Get("http://" + p.addr + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// metric returns the value of the first sample of name with the given
// label text (e.g. `slot="x"`) on /metrics; ok is false when absent or
// unreachable.
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
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// TestStandbyTakesOver runs two relay processes on one slot: the second
// waits as a standby (not ready, leader 0, serving the slot metrics) and,
// when the first is SIGKILLed while writers commit, takes over within a
// few seconds; Kafka ends up with every committed message.
func TestStandbyTakesOver(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	db := testenv.NewDB(t)
	kafka := testenv.NewKafka(t)
	dir := t.TempDir()
	logA, logB := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	slot := db.Name
	common := []string{"--database-url", db.URL, "--slot", slot, "--publication", "pub_takeover"}
	if code, out := runRelay(t, bin, append([]string{"setup"}, common...)...); code != 0 {
		t.Fatalf("relay setup: exit %d\n%s", code, out)
	}
	defer func() {
		if t.Failed() {
			t.Logf("active relay log:\n%s\nstandby relay log:\n%s", logTail(logA), logTail(logB))
		}
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	a, b := probe{freeAddr(t), hc}, probe{freeAddr(t), hc}
	run := func(p probe, log string) *relayProc {
		return startRelay(t, bin, log, append(append([]string{"run"}, common...),
			"--brokers", kafka.Brokers[0], "--metrics-addr", p.addr, "--log-format", "json",
			"--status-interval", "500ms", "--lag-poll-interval", "200ms", "--standby-retry-interval", "500ms",
			"--heartbeat-interval", "200ms")...)
	}
	slotLabel := `slot="` + slot + `"`

	pa := run(a, logA)
	testenv.WaitFor(t, time.Minute, "the first relay ready", func() (bool, error) {
		if pa.exited() {
			return false, fmt.Errorf("first relay exited: %v", pa.err)
		}
		return a.ready() == http.StatusOK, nil
	})
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
	testenv.WaitFor(t, time.Minute, "the standby ready", func() (bool, error) {
		if pb.exited() {
			return false, fmt.Errorf("standby exited: %v", pb.err)
		}
		return b.ready() == http.StatusOK, nil
	})
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
			recs, err := testenv.ReadTopic(context.Background(), kafka.Brokers, "outbox."+typ)
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
