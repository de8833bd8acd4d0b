package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// testSenderTimeout is the wal_sender_timeout of the relays in the
// liveness tests, set per connection (options=-c …) so that the other
// tests on the shared server keep the default. The relay's liveness bound
// is half of it.
const testSenderTimeout = 2 * time.Second

// committedIDs returns every message ID the ledger holds as committed.
func committedIDs(l *ledger) []uuid.UUID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []uuid.UUID
	for _, agg := range l.committed {
		ids = append(ids, agg...)
	}
	return ids
}

// TestHalfOpenReplicationConnection puts a proxy between the relay and
// Postgres and makes it stop forwarding while keeping the connections
// open (a blackholing middlebox: no error, no FIN, the proxy's kernel
// still acknowledges). The relay must notice that the server went silent
// within its liveness bound (wal_sender_timeout/2 plus a status interval),
// turn unready, and once the path carries bytes again reconnect and
// publish every committed message.
func TestHalfOpenReplicationConnection(t *testing.T) {
	t.Parallel()
	bin, db, kafka, logPath := binaryEnv(t)
	slot := db.Name
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	relayURL := testenv.WithSenderTimeout(t, proxy.ProxyURL(t, db.URL), testSenderTimeout)
	common := []string{"--slot", slot, "--publication", "pub_halfopen"}
	mustRunRelay(t, bin, append([]string{"setup", "--database-url", db.URL}, common...)...)
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	p := probe{freeAddr(t), hc}
	pr := startRelay(t, bin, logPath, append(append([]string{"run", "--database-url", relayURL}, common...),
		"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic(topicTemplate), "--metrics-addr", p.addr, "--log-format", "json", "--lag-poll-interval", "200ms")...)
	waitReady(t, "the relay ready", pr, p)
	if !strings.Contains(readFile(t, logPath), `"liveness_bound":"1s"`) {
		t.Errorf("the relay did not log a liveness bound of 1s (wal_sender_timeout %v / 2)", testSenderTimeout)
	}

	l := newLedger()
	stopWriters := startWriters(t, db.Pool, l)
	testenv.WaitFor(t, time.Minute, "the relay publishing", func() (bool, error) {
		v, _ := p.metric("pgoutbox_relay_events_published_total", "")
		return v > 0, nil
	})

	proxy.Pause()
	paused := time.Now()
	// Without a liveness bound the relay stays ready for the ~15 minutes
	// the kernel would retransmit (and here forever: the proxy's kernel
	// acknowledges everything).
	testenv.WaitFor(t, 30*time.Second, "the relay unready after the path went silent", func() (bool, error) {
		if pr.exited() {
			return false, fmt.Errorf("relay exited: %v", pr.err)
		}
		return p.ready() == http.StatusServiceUnavailable, nil
	})
	noticed := time.Since(paused)
	silent, ok := p.metric("pgoutbox_relay_seconds_since_server_message", `slot="`+slot+`"`)
	if !ok || silent < 1 {
		t.Errorf("seconds_since_server_message = %v (present %v) while the server is silent, want at least the bound (1s)", silent, ok)
	}
	// The liveness bound, or a check on a regular connection through the
	// same path (the catalog watch), whichever times out first, ends the
	// session.
	testenv.WaitFor(t, 30*time.Second, "the relay logging the interruption", func() (bool, error) {
		return strings.Contains(readFile(t, logPath), "replication interrupted; reconnecting"), nil
	})
	if !strings.Contains(readFile(t, logPath), "no sign of life from the replication connection") {
		t.Log("the session ended on another check's timeout before the liveness bound")
	}
	t.Logf("half-open connection noticed after %v (bound 1s + status interval 333ms); seconds_since_server_message %.2f",
		noticed.Round(time.Millisecond), silent)

	proxy.Resume()
	resumed := time.Now()
	waitReady(t, "the relay ready again", pr, p)
	t.Logf("ready again %v after the path came back", time.Since(resumed).Round(time.Millisecond))
	committed := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.count }
	target := committed() + 200
	testenv.WaitFor(t, time.Minute, "writers going on after the reconnect", func() (bool, error) { return committed() >= target, nil })
	stopWriters()
	endLSN := writeFence(t, db.Pool, l)
	waitConfirmed(t, db.Pool, slot, endLSN, pr)

	seen := make(map[uuid.UUID]bool)
	for _, typ := range crashAggregateTypes {
		for _, rec := range testenv.MustReadTopic(t, kafka.Brokers, kafka.Topic("outbox."+typ)) {
			h, _ := rec.Header("message-id")
			id, _ := uuid.Parse(h)
			seen[id] = true
		}
	}
	want := committedIDs(l)
	missing := 0
	for _, id := range want {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d committed messages missing from Kafka", missing, len(want))
	}
	for id := range l.rolledBack {
		if seen[id] {
			t.Errorf("message %s of a rolled-back transaction is in Kafka", id)
		}
	}
	t.Logf("%d committed messages, all in Kafka", len(want))
	if code := pr.stop(time.Minute); code != 0 {
		t.Errorf("relay after SIGTERM: exit %d, want 0", code)
	}
}
