package kafkapub

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// Read reads the topics dests from the first offset of each partition
// whose timestamp is at or after since up to the high watermark when the
// read begins, keeping what a read_committed reader sees (ScanTopics),
// with the producer's connection settings; it needs no open session.
func (p *Publisher) Read(ctx context.Context, dests []string, since time.Time, each func(*publish.Record, publish.Place) error) (publish.Holdings, error) {
	var rec publish.Record
	var hs []publish.Header
	return ScanTopics(ctx, producer.ClientOpts(p.cfg.Producer), dests, since, p.log, func(r *kgo.Record) error {
		hs = hs[:0]
		for _, h := range r.Headers {
			hs = append(hs, publish.Header{Key: h.Key, Value: h.Value})
		}
		rec = publish.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
		return each(&rec, publish.Place{Partition: r.Partition, Offset: r.Offset})
	})
}
