package relaycli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// metricsAddr waits for the "serving metrics" log record of a JSON log and
// returns its address.
func metricsAddr(t *testing.T, log *testenv.SyncBuffer, done <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(log.String()))
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "serving metrics" {
				return rec.Addr
			}
		}
		select {
		case <-done:
			t.Fatalf("relay run ended before serving metrics:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no serving metrics log record within 30s:\n%s", log.String())
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// relay run serves /healthz, /readyz and /metrics, publishes, and exits 0
// when its context ends (what SIGTERM does in cmd/relay).
func TestRunServesHealthAndStopsGracefully(t *testing.T) {
	t.Parallel()
	f, kafka := setupKafka(t)

	ctx := context.Background()
	// The test server trusts every login, so a password can be added to
	// check it never reaches the logs.
	const secret = "RunSecretPw99"
	u, err := url.Parse(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret)
	args := []string{"run", "--database-url", u.String(), "--slot", f.slot, "--publication", "pub_" + f.slot,
		"--brokers", kafka.Brokers[0], "--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}
	rel := start(t, args...)
	base, stderr := rel.base, rel.stderr
	if status, _ := get(t, base+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz: %d", status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := get(t, base+"/readyz")
		if status == http.StatusOK {
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("/readyz: %d, want 200 once streaming\n%s", status, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	w, _ := outbox.NewWriter(outbox.Pgx(nil), nil)
	err = pgx.BeginFunc(ctx, f.db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: "o-1",
			EventType: "order.created", BusinessKey: "bk-1", Payload: []byte(`{"n":1}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitForRecords(t, kafka.Brokers, "outbox.order", 1, time.Minute)

	status, body := get(t, base+"/metrics")
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes", `pgoutbox_relay_events_published_total{topic="outbox.order"} 1`} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", status, want)
		}
	}

	rel.stop(t)
	if logs := stderr.String(); strings.Contains(logs, secret) || !strings.Contains(logs, ":xxxxx@") {
		t.Errorf("logs show the database password, or not its redacted URL:\n%s", logs)
	}
	if _, err := (&http.Client{Timeout: time.Second}).Get(base + "/healthz"); err == nil {
		t.Error("metrics server still answers after relay run returned")
	}
}
