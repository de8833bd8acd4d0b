package relay_test

import (
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.start(t)
	ids := b.insert(t, msg("a", 1), msg("b", 2), msg("a", 3))
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 3, 30*time.Second)
	for _, r := range recs {
		t.Logf("%d@%d key=%s value=%s headers=%v ts=%v", r.Partition, r.Offset, r.Key, r.Value, r.Headers, r.Timestamp)
	}
	_ = ids
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
}
