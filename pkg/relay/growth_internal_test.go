package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// growthTopics is how many distinct topics rows name in the growth tests.
const growthTopics = 2000

// The decoder's topic cache stays within its bounds, in names and bytes,
// whatever aggregate types rows hold: 2,000 distinct legal ones, 2,000
// distinct 300 kB ones (illegal: never cached) and 2,000 explicit topics.
func TestTopicCacheBounded(t *testing.T) {
	t.Parallel()
	var c topicCache
	tmpl := parseTopicTemplate(DefaultTopicTemplate)
	huge := []byte(strings.Repeat("x", 300_000))
	for i := range growthTopics {
		copy(huge, fmt.Sprintf("%08d", i))
		if _, err := c.rendered(&tmpl, huge, []byte("e")); err == nil {
			t.Fatal("a 300 kB topic passed")
		}
	}
	if names, bytes := c.size(); names != 0 {
		t.Fatalf("%d illegal names cached (%d bytes), want none", names, bytes)
	}
	for i := range growthTopics {
		at := fmt.Appendf(nil, "type-%d-%s", i, strings.Repeat("a", 200))
		if topic, err := c.rendered(&tmpl, at, []byte("e")); err != nil || topic != "outbox."+string(at) {
			t.Fatalf("type %d: topic %q, %v", i, topic, err)
		}
		explicit := fmt.Appendf(nil, "explicit-%d-%s", i, strings.Repeat("b", 230))
		if topic, err := c.explicit(explicit); err != nil || topic != string(explicit) {
			t.Fatalf("explicit topic %d: %q, %v", i, topic, err)
		}
	}
	names, bytes := c.size()
	const maxBytes = 2 * topicCacheSize * (topicCacheKeyBytes + 249)
	if names > 2*topicCacheSize || bytes > maxBytes {
		t.Fatalf("topic cache holds %d names, %d bytes; want at most %d, %d", names, bytes, 2*topicCacheSize, maxBytes)
	}
	t.Logf("topic cache after %d distinct legal, %d illegal and %d explicit topics: %d names, %d bytes of keys and values",
		growthTopics, growthTopics, growthTopics, names, bytes)
}

// A sink that writes to 2,000 distinct topics (auto-created) keeps the
// published counter's topic series within maxTopicSeries (later topics
// count under OtherTopicLabel), and every record is counted.
func TestSinkPerTopicStateBounded(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	c, err := (&Config{DatabaseURL: "x", Brokers: k.Brokers, Logger: slog.New(slog.DiscardHandler)}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics(c.Slot, &live{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.published)
	s := newSink(&c, m)
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const perBatch = 100
	for n := 0; n < growthTopics; n += perBatch {
		batch := make([]event, perBatch)
		for i := range batch {
			batch[i].msg = kgo.Record{Topic: fmt.Sprintf("grow.%04d", n+i), Key: []byte("k"), Value: []byte("v")}
		}
		if err := s.publish(ctx, batch); err != nil {
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
			if mt.GetLabel()[0].GetValue() == OtherTopicLabel {
				other = mt.GetCounter().GetValue()
			}
		}
	}
	// The dead-letter topic's series comes first, then 999 topics, then
	// (other).
	if series != maxSeries+1 || sum != growthTopics || other != growthTopics-(maxSeries-1) {
		t.Errorf("%d published series summing to %v, %v under %s; want %d, %d, %d", series, sum, other, OtherTopicLabel,
			maxSeries+1, growthTopics, growthTopics-(maxSeries-1))
	}
	t.Logf("after %d topics: %d published series", growthTopics, series)
}
