package relaycli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// backfill publishes the rows of its time range and aggregate type, the
// same records relay run publishes, read back with kcat; recover without a
// gap does nothing; a dropped slot is a gap that recover repairs.
func TestBackfillAndRecover(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	f.exec(t, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
		SELECT gen_random_uuid(), CASE WHEN n % 2 = 0 THEN 'order' ELSE 'user' END, 'a' || n, 'e', 'bk' || n, '{}', now() - make_interval(mins => n)
		FROM generate_series(1, 10) AS n`)
	kafkaArgs := []string{"--brokers", k.Brokers[0]}
	// Rows 2, 4 and 6 minutes old of type order.
	r := f.cli(t, "backfill", append(kafkaArgs, "--since", "7m", "--until", "90s", "--aggregate-type", "order")...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "published 3 outbox rows") || !strings.Contains(r.stderr, "backfill progress") {
		t.Fatalf("backfill output:\n%s\n%s", r.stdout, r.stderr)
	}
	recs := testenv.WaitForRecords(t, k.Brokers, "outbox.order", 3, 30*time.Second)
	if len(recs) != 3 {
		t.Fatalf("outbox.order holds %d records, want 3", len(recs))
	}
	wantCode(t, f.cli(t, "backfill", append(kafkaArgs, "--since", "yesterday")...), 2)

	r = f.cli(t, "recover", kafkaArgs...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "no gap, nothing to recover") {
		t.Fatalf("recover without a gap:\n%s", r.stdout)
	}
	f.exec(t, `SELECT pg_drop_replication_slot($1)`, f.slot)
	r = f.cli(t, "status")
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "gap on slot "+f.slot+" (slot-missing)")
	r = f.cli(t, "recover", append(kafkaArgs, "--backfill-margin", "1h")...)
	wantCode(t, r, 0)
	// The 3 rows backfilled above are in Kafka: only the 7 others go out.
	if !strings.Contains(r.stdout, "recovered a gap (slot-missing): published 7 outbox rows") || !strings.Contains(r.stdout, "(3 more were in Kafka already)") {
		t.Fatalf("recover:\n%s\n%s", r.stdout, r.stderr)
	}
	if row := f.slotRow(t); !row.exists {
		t.Fatal("recover did not create the slot")
	}
}
