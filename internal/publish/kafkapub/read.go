package kafkapub

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/verify"
)

// Read reads the topics dests read_committed, from the first offset of
// each partition whose timestamp is at or after since up to the last
// stable offset when the read begins (verify.ScanTopics), with the
// producer's connection settings; it needs no open session.
func (p *Publisher) Read(ctx context.Context, dests []string, since time.Time, each func(*publish.Record) error) (publish.Holdings, error) {
	var rec publish.Record
	var hs []publish.Header
	return verify.ScanTopics(ctx, producer.ClientOpts(p.cfg.Producer), dests, since, p.log, func(r *kgo.Record) error {
		hs = hs[:0]
		for _, h := range r.Headers {
			hs = append(hs, publish.Header{Key: h.Key, Value: h.Value})
		}
		rec = publish.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
		return each(&rec)
	})
}
