package rabbitmqpub_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
)

// BenchmarkWrite measures the RabbitMQ sink's writes as the relay makes
// them: writes of 1,000 records shaped as the relay's (a 300-byte value,
// the relay's five headers, WAL positions of 100-row transactions), one
// in flight, into a stream of the shared node. It prints messages a
// second; with -benchmem, the publisher's allocations per write:
//
//	go test -run XXX -bench 'BenchmarkWrite$' -benchtime 400x -benchmem ./internal/publish/rabbitmqpub
func BenchmarkWrite(b *testing.B) {
	r, _, name := setup(b)
	p, err := publish.New(rabbitmqpub.Name, publish.Config{Slot: "slot1", Settings: rabbitmqpub.Config{URI: r.StreamURI, Incarnation: "inc1"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Open(b.Context(), publish.Session{}); err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	value := []byte(`{"data":"` + strings.Repeat("x", 280) + `"}`)
	const size = 1000
	// One write's records, built before the clock starts (the relay's
	// decoder makes them) and written again at later WAL positions: the
	// stream deduplicates on the publishing ID, which comes from the
	// position alone.
	recs := make([]*publish.Record, size)
	for i := range recs {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		key := fmt.Sprintf("payment-%d", i)
		recs[i] = &publish.Record{Topic: name, Key: []byte(key), Value: value, Timestamp: time.Now(),
			Headers: []publish.Header{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte("bk-" + id)},
				{Key: "event-type", Value: []byte("payment.created")}, {Key: "aggregate-type", Value: []byte("payment")},
				{Key: "aggregate-id", Value: []byte(key)}}}
	}
	out := make([]publish.Outcome, size)
	b.ResetTimer()
	for w := range b.N {
		for i, rec := range recs {
			n := w*size + i
			rec.Pos = publish.Position{Final: pglogrepl.LSN(0x1_0000_0000 + n/100*0x1000), Seq: n % 100}
		}
		if err := p.Write(b.Context(), recs, out); err != nil {
			b.Fatal(err)
		}
		for i, o := range out {
			if o.Verdict != publish.Confirmed {
				b.Fatalf("record %d: %+v", i, o)
			}
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
}
