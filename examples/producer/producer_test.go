package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var listening = regexp.MustCompile(`listening on (\S+)`)

// Orders placed through the HTTP API reach Kafka through the relay, one
// record per order with the order ID as key and the payment's business
// key; a refused order writes neither an order nor an event.
func TestOrdersReachKafka(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	kafka := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The slot must exist before the first order: it streams what commits
	// after its creation.
	rcfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: kafka.Brokers}, Slot: "producer_" + db.Name, Logger: slog.New(slog.DiscardHandler)}
	if err := relay.Setup(ctx, rcfg); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"--database-url", db.URL, "--listen", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	var addr string
	for addr == "" {
		select {
		case code := <-done:
			t.Fatalf("producer exited %d: %s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
		}
	}

	post := func(body string) (int, Order) {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/orders", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o Order
		if resp.StatusCode == http.StatusCreated {
			if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, o
	}
	want := map[string]bool{}
	for _, amount := range []string{"100", "250", "1200"} {
		code, o := post(`{"customer":"ada","amount_cents":` + amount + `}`)
		if code != http.StatusCreated || o.ID == "" {
			t.Fatalf("POST /orders: %d %+v", code, o)
		}
		want[o.ID] = true
	}
	if code, _ := post(`{"customer":"ada","amount_cents":0}`); code != http.StatusBadRequest {
		t.Errorf("order without amount: %d, want 400", code)
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("producer exited %d: %s", code, stderr.String())
	}
	var orders, events int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM outbox)`).Scan(&orders, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 3 || events != 3 {
		t.Fatalf("%d orders and %d outbox rows, want 3 and 3", orders, events)
	}

	// The relay publishes them; kcat reads them back.
	r, err := relay.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	stopRelay := testenv.Go(ctx, t, r.Run)
	recs := testenv.WaitForRecords(t, kafka.Brokers, "outbox.order", 3, time.Minute)
	if err := stopRelay(); err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		id := string(rec.Key)
		bk, _ := rec.Header("business-key")
		et, _ := rec.Header("event-type")
		if !want[id] || bk != "charge-"+id || et != "order.placed" {
			t.Errorf("unexpected record key %q headers %v", id, rec.Headers)
		}
		var o Order
		if err := json.Unmarshal(rec.Value, &o); err != nil || o.ID != id {
			t.Errorf("payload %s: %v", rec.Value, err)
		}
		delete(want, id)
	}
	if len(want) != 0 {
		t.Errorf("orders without a record: %v", want)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-database-url") {
		t.Errorf("--help: exit %d\n%s", code, stderr.String())
	}
	if code := run(context.Background(), nil, &stdout, &stderr); code != 2 {
		t.Errorf("no database URL: exit %d, want 2", code)
	}
}
