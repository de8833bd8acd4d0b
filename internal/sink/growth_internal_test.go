package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// growthTopics is how many distinct topics rows name in the growth tests.
const growthTopics = 2000

// A sink that writes to 2,000 distinct topics (auto-created) keeps the
// published counter's topic series within maxTopicSeries (later topics
// count under OtherTopicLabel), and every record is counted.
func TestSinkPerTopicStateBounded(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	c := testConfig(k.Brokers)
	m := relaymetrics.NewMetrics(c.Slot, &pgconnect.Live{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Published)
	c.DeadLetters.Invalid = m.Invalid
	s := NewSink(c, m)
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const perBatch = 100
	for n := 0; n < growthTopics; n += perBatch {
		batch := make([]decode.Event, perBatch)
		for i := range batch {
			batch[i].Record = publish.Record{Topic: fmt.Sprintf("grow.%04d", n+i), Key: []byte("k"), Value: []byte("v")}
		}
		if err := s.Publish(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	const maxSeries = 1000 // maxTopicSeries
	series := 0
	sum := 0.0
	var other float64
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pgoutbox_relay_events_published_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			series++
			sum += mt.GetCounter().GetValue()
			if mt.GetLabel()[0].GetValue() == relaytype.OtherTopicLabel {
				other = mt.GetCounter().GetValue()
			}
		}
	}
	// The dead-letter topic's series comes first, then 999 topics, then
	// (other).
	if series != maxSeries+1 || sum != growthTopics || other != growthTopics-(maxSeries-1) {
		t.Errorf("%d published series summing to %v, %v under %s; want %d, %d, %d", series, sum, other, relaytype.OtherTopicLabel,
			maxSeries+1, growthTopics, growthTopics-(maxSeries-1))
	}
	t.Logf("after %d topics: %d published series", growthTopics, series)
}
