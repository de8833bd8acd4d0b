package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

func TestMain(m *testing.M) {
	workerMain()
	testenv.Main(m)
}

var (
	apiLine     = regexp.MustCompile(`fake payment API on (\S+)`)
	metricsLine = regexp.MustCompile(`metrics on (http://\S+)`)
)

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// Every order is charged exactly once per business key, with each
// strategy, although Kafka delivers each event twice (same message ID), the
// producer sent some twice (new message ID, same business key), and the
// payment API loses the response of every third charge, so the consumer
// retries: with the same idempotency key, after asking the provider about
// the saved request reference, or by confirming the saved reservation again.
func TestChargedOncePerBusinessKey(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{strategyIdempotencyKey, strategyQueryStatus, strategyReserveConfirm} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			testChargedOnce(t, strategy)
		})
	}
}

func testChargedOnce(t *testing.T, strategy string) {
	db := testenv.NewDB(t)
	k, topic, group := newKafka(t, testenv.DefaultPartitions)
	duplicates := regexp.MustCompile(`(?m)^pgoutbox_inbox_messages_total\{consumer="` + regexp.QuoteMeta(group) + `",outcome="duplicate"\} (\d+)`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{
			"--database-url", db.URL, "--brokers", strings.Join(k.Brokers, ","), "--topic", topic, "--group", group,
			"--strategy", strategy, "--payment-api-listen", "127.0.0.1:0", "--payment-api-fail-every", "3",
			"--metrics-addr", "127.0.0.1:0", "--retry-backoff", "20ms",
		}, &stdout, &stderr)
	}()
	var apiURL, metricsURL string
	testenv.WaitFor(t, time.Minute, "the consumer to start", func() (bool, error) {
		select {
		case code := <-done:
			t.Fatalf("payment-consumer exited %d: %s", code, stderr.String())
		default:
		}
		a, m := apiLine.FindStringSubmatch(stdout.String()), metricsLine.FindStringSubmatch(stdout.String())
		if a != nil && m != nil {
			apiURL, metricsURL = a[1], m[1]
		}
		return apiURL != "", nil
	})

	// 12 orders; every event delivered twice; 4 re-sent by the producer
	// under a new message ID.
	const orders = 12
	var records []*kgo.Record
	amounts := map[string]int64{}
	for i := range orders {
		o := orderPlaced{OrderID: uuid.NewString(), Customer: "ada", AmountCents: int64(100 * (i + 1))}
		amounts["charge-"+o.OrderID] = o.AmountCents
		id := uuid.NewString()
		records = append(records, orderRecord(o, id), orderRecord(o, id))
		if i%3 == 0 {
			records = append(records, orderRecord(o, uuid.NewString()))
		}
	}
	writeRecords(t, k.Brokers, topic, records...)

	// Every delivery beyond the first of a business key was a duplicate.
	wantDuplicates := len(records) - orders
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("%d duplicates", wantDuplicates), func() (bool, error) {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := duplicates.FindSubmatch(body)
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(string(m[1]))
		}
		return n >= wantDuplicates, nil
	})

	var charges []charge
	getJSON(t, apiURL+"/v1/charges", &charges)
	requests := 0
	byKey := map[string]string{}
	for _, c := range charges {
		key := chargeKey(c)
		if amounts[key] != c.AmountCents {
			t.Errorf("charge %s: key %s amount %d, want %d", c.ID, key, c.AmountCents, amounts[key])
		}
		delete(amounts, key)
		byKey[key] = c.ID
		requests += c.Requests
	}
	if len(charges) != orders || len(amounts) != 0 {
		t.Fatalf("%d charges for %d orders; uncharged: %v", len(charges), orders, amounts)
	}
	// Four responses were lost. The retry sent the idempotency key again
	// or confirmed the saved reservation again (one more request that
	// charged nothing), or looked the saved reference up (no request to
	// charge); the last two reconciled.
	wantRequests, wantReconciled := orders+orders/3, orders/3
	switch strategy {
	case strategyIdempotencyKey:
		wantReconciled = 0
	case strategyQueryStatus:
		wantRequests = orders
	}
	if requests != wantRequests {
		t.Errorf("%d charge requests (or confirms), want %d", requests, wantRequests)
	}
	if n := strings.Count(stderr.String(), "reconciled=true"); n != wantReconciled {
		t.Errorf("%d deliveries reconciled, want %d", n, wantReconciled)
	}

	// The inbox recorded each charge ID as the result of its business key.
	rows, err := db.Pool.Query(ctx, `SELECT business_key, status, result_ref FROM inbox WHERE consumer = $1`, group)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var key, status string
		var ref *string
		if err := rows.Scan(&key, &status, &ref); err != nil {
			t.Fatal(err)
		}
		if status != "COMPLETED" || ref == nil || *ref != byKey[key] {
			t.Errorf("inbox %s: %s %v, want COMPLETED %s", key, status, ref, byKey[key])
		}
		n++
	}
	if rows.Err() != nil || n != orders {
		t.Errorf("%d inbox rows (%v), want %d", n, rows.Err(), orders)
	}

	stop()
	if code := <-done; code != 0 {
		t.Errorf("payment-consumer exited %d: %s", code, stderr.String())
	}
}

// chargeKey is the business key a charge was made for: its idempotency key,
// or the business key its request reference starts with.
func chargeKey(c charge) string {
	if c.IdempotencyKey != "" {
		return c.IdempotencyKey
	}
	key, _, _ := strings.Cut(c.Reference, "/attempt-")
	return key
}

// orderRecord is the Kafka record of the order.placed event o with message
// ID id, as the relay publishes it.
func orderRecord(o orderPlaced, id string) *kgo.Record {
	payload, _ := json.Marshal(o)
	return &kgo.Record{Key: []byte(o.OrderID), Value: payload, Headers: []kgo.RecordHeader{
		{Key: inbox.HeaderMessageID, Value: []byte(id)},
		{Key: inbox.HeaderBusinessKey, Value: []byte("charge-" + o.OrderID)},
		{Key: inbox.HeaderEventType, Value: []byte("order.placed")},
	}}
}

// newKafka is the test's broker (testenv.NewBroker: kfake, or the shared
// Apache Kafka with PGOUTBOX_TEST_KAFKA=kafka) letting consumer groups use a
// short session timeout, with the order topic of the given number of
// partitions; it returns the names of the topic and of the consumer group
// (the inbox consumer name too) on it.
func newKafka(t *testing.T, partitions int32) (k *testenv.Kafka, topic, group string) {
	t.Helper()
	k = testenv.NewBroker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	topic, group = k.Topic("outbox.order"), k.Topic("payments")
	k.CreateTopics(t, partitions, topic)
	return k, topic, group
}

// writeRecords produces records to topic, acknowledged by every replica.
func writeRecords(t *testing.T, brokers []string, topic string, records ...*kgo.Record) {
	t.Helper()
	for _, r := range records {
		r.Topic = topic
	}
	testenv.Produce(t, brokers, false, records...)
}

// orderMessage is the inbox message of the order.placed event o with
// message ID id, for the tests that hand it to the inbox directly.
func orderMessage(o orderPlaced, id string) inbox.Message {
	payload, _ := json.Marshal(o)
	return inbox.Message{ID: id, BusinessKey: "charge-" + o.OrderID, Payload: payload}
}

// newInbox is an Inbox of consumer payments with cfg's settings on a fresh
// migrated database.
func newInbox(t *testing.T, cfg inbox.Config) *inbox.Inbox[pgx.Tx] {
	t.Helper()
	db := testenv.NewDB(t)
	if _, err := inbox.Migrate(context.Background(), inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	cfg.Consumer, cfg.Logger = "payments", slog.New(slog.DiscardHandler)
	in, err := inbox.New(inbox.Pgx(db.Pool), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// serveAPI serves a payment provider's routes until the test ends and
// returns a client of it.
func serveAPI(t *testing.T, routes http.Handler) *paymentClient {
	srv := httptest.NewServer(routes)
	t.Cleanup(srv.Close)
	return newPaymentClient(srv.URL, 10*time.Second)
}

// A worker that charged but did not record the result before its lease
// expired (it hung or crashed) is taken over by the next delivery, which
// calls the API again with the same idempotency key: the API replays the
// first charge, so the customer is charged once.
func TestLeaseTakeoverChargesOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := newInbox(t, inbox.Config{LeaseDuration: 200 * time.Millisecond})
	api := newPaymentAPI(0)
	client := serveAPI(t, api.routes())
	msg := orderMessage(orderPlaced{OrderID: "o-1", Customer: "ada", AmountCents: 4200}, uuid.NewString())

	// The first worker charges, then hangs past its lease.
	charged, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := in.ProcessExternal(ctx, msg, func(ctx context.Context, _ inbox.Message, key string) (string, error) {
			ref, err := client.charge(ctx, msg, key)
			close(charged)
			<-release
			return ref, err
		})
		first <- err
	}()
	<-charged

	// A redelivery meets the live lease (Busy), then takes over.
	var res inbox.Result
	testenv.WaitFor(t, 30*time.Second, "a takeover", func() (bool, error) {
		var err error
		res, err = in.ProcessExternal(ctx, msg, func(ctx context.Context, _ inbox.Message, key string) (string, error) {
			return client.charge(ctx, msg, key)
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome != inbox.Busy, nil
	})
	close(release)
	if err := <-first; !errors.Is(err, inbox.ErrLeaseLost) {
		t.Errorf("first worker: %v, want ErrLeaseLost", err)
	}
	charges := api.list()
	if res.Outcome != inbox.Processed || len(charges) != 1 || res.ResultRef != charges[0].ID || charges[0].Requests != 2 {
		t.Fatalf("takeover %v ref %q; charges %+v; want one charge requested twice", res.Outcome, res.ResultRef, charges)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "-payment-api-url") ||
		!strings.Contains(stderr.String(), "in order of preference") {
		t.Errorf("--help: exit %d\n%s", code, stderr.String())
	}
}

// A strategy it does not know and a request timeout that does not fit in
// the lease are usage errors (exit 2), found before connecting anywhere.
func TestBadUsage(t *testing.T) {
	t.Parallel()
	base := []string{"--database-url", "postgres://nowhere.invalid/db", "--brokers", "nowhere.invalid:9092"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strategy", "retry-and-hope"}, `unknown --strategy "retry-and-hope"`},
		{[]string{"--payment-api-timeout", "30s", "--lease", "30s"}, "must be positive and below --lease 30s"},
		{[]string{"--payment-api-timeout", "0s"}, "must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(base, tc.args...), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// A 409 (the same idempotency key in flight), a 429 and a 5xx are retried
// with the same key; a refusal such as 422 is permanent.
func TestChargeRetryableStatuses(t *testing.T) {
	t.Parallel()
	api := newPaymentAPI(0)
	client := serveAPI(t, api.routes())
	msg := orderMessage(orderPlaced{OrderID: "o-1", Customer: "ada", AmountCents: 4200}, "m-1")
	ctx := context.Background()
	for _, status := range []int{http.StatusConflict, http.StatusTooManyRequests, http.StatusRequestTimeout,
		http.StatusTooEarly, http.StatusServiceUnavailable, http.StatusUnprocessableEntity} {
		api.refuseNext(status)
		_, err := client.charge(ctx, msg, msg.BusinessKey)
		if err == nil {
			t.Fatalf("%d: no error", status)
		}
		if want := status == http.StatusUnprocessableEntity; inbox.IsPermanent(err) != want {
			t.Errorf("%d: permanent %v, want %v (%v)", status, inbox.IsPermanent(err), want, err)
		}
	}
	ref, err := client.charge(ctx, msg, msg.BusinessKey)
	if charges := api.list(); err != nil || len(charges) != 1 || ref != charges[0].ID {
		t.Fatalf("charge after the refusals: %q, %v; charges %+v", ref, err, charges)
	}
}
