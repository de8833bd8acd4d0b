package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// relay run --cloudevents writes the CloudEvents Kafka binding's binary
// content mode: kcat reads, byte for byte, ce_specversion 1.0, ce_id (the
// message ID), ce_source (by default /pgoutbox/DATABASE/SCHEMA.TABLE),
// ce_type (the event type), ce_time (the commit time, RFC 3339 in UTC to
// the millisecond: the record's timestamp), ce_subject (the aggregate ID)
// and content-type, besides the contract headers and the row's own. A row
// whose headers name a CloudEvents attribute is dead-lettered (bad-headers),
// not published with two ce_type headers. The expected values are built
// here from the rows, the database name and kcat's timestamp, not by the
// relay's code.
func TestCloudEventsHeadersByteForByte(t *testing.T) {
	t.Parallel()
	bin, db, kafka, logPath := binaryEnv(t)
	ctx := context.Background()
	base := []string{"--database-url", db.URL, "--slot", db.Name + "_ce", "--publication", "pub_ce"}
	mustRunRelay(t, bin, append([]string{"setup"}, base...)...)
	dlq := kafka.Topic("ce.dlq")
	run := append(append([]string{"run", "--cloudevents"}, base...), "--brokers", kafka.Brokers[0], "--metrics-addr", "",
		"--status-interval", "500ms", "--topic-template", kafka.Topic(relaytype.DefaultTopicTemplate), "--dlq-topic", dlq)
	proc := startRelay(t, bin, logPath, run...)

	good, clash := uuid.New(), uuid.New()
	for _, r := range []struct {
		id      uuid.UUID
		headers string
	}{{good, `{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`}, {clash, `{"ce_type": "forged"}`}} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers)
			VALUES ($1, 'payment', 'pay-42', 'payment.completed', 'req-7', '{"amount_cents": 1250}', $2)`, r.id, r.headers); err != nil {
			t.Fatal(err)
		}
	}
	recs := testenv.WaitForRecords(t, kafka.Brokers, kafka.Topic("outbox.payment"), 1, 2*time.Minute)
	if len(recs) != 1 {
		t.Fatalf("%d records on outbox.payment, want 1", len(recs))
	}
	rec := recs[0]
	want := map[string]string{
		"message-id":     good.String(),
		"business-key":   "req-7",
		"event-type":     "payment.completed",
		"aggregate-type": "payment",
		"aggregate-id":   "pay-42",
		"traceparent":    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"ce_specversion": "1.0",
		"ce_id":          good.String(),
		"ce_source":      "/pgoutbox/" + db.Name + "/public.outbox",
		"ce_type":        "payment.completed",
		"ce_time":        rec.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"),
		"ce_subject":     "pay-42",
		"content-type":   "application/json",
	}
	if got := headerMap(t, rec); !maps.Equal(got, want) {
		t.Errorf("headers\n%v\nwant\n%v", sorted(got), sorted(want))
	}
	if string(rec.Key) != "pay-42" || string(rec.Value) != `{"amount_cents": 1250}` {
		t.Errorf("key %q value %q", rec.Key, rec.Value)
	}
	if since := time.Since(rec.Timestamp); since < 0 || since > time.Hour {
		t.Errorf("record timestamp %v is not the recent commit time", rec.Timestamp)
	}
	dead := testenv.WaitForRecords(t, kafka.Brokers, dlq, 1, 2*time.Minute)
	if code := proc.stop(time.Minute); code != 0 {
		t.Errorf("relay run exited %d", code)
	}
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	if id, _ := dead[0].Header("message-id"); id != clash.String() {
		t.Errorf("dead letter of message %s, want %s", id, clash)
	}
	if reason, _ := dead[0].Header("dlq-reason"); reason != relaytype.ReasonBadHeaders {
		t.Errorf("dead letter reason %q, want %s", reason, relaytype.ReasonBadHeaders)
	}
}
