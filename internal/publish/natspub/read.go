package natspub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Read reads, for each topic of dests, the messages of the streams that
// capture its subjects (the topic, a dot and a bucket: "outbox.order.*")
// stored at or after since, up to what each stream held for them when its
// read began (see publish.Reader); it needs no open session. A topic whose
// subjects no stream captures is missing; one whose stream the server does
// not let the relay read (a permission, a refused consumer) is unreadable.
//
// Each message is given as a record of its topic: its headers, its data as
// the value, the aggregate-id header as the key (the relay's key) and the
// time the stream stored it as the timestamp (at or after the commit
// time: JetStream keeps no producer timestamp). Its place is the subject's
// bucket as the partition and the stream sequence as the offset.
func (p *Publisher) Read(ctx context.Context, dests []string, since time.Time, each func(*publish.Record, publish.Place) error) (publish.Holdings, error) {
	var h publish.Holdings
	if len(dests) == 0 {
		return h, nil
	}
	nc, err := p.connect(ctx)
	if err != nil {
		return h, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return h, fmt.Errorf("nats sink: %w", err)
	}
	for _, topic := range dests {
		filter := topic + ".*"
		streams, err := streamsOf(ctx, js, filter)
		switch {
		case unreadable(err):
			h.Unreadable = append(h.Unreadable, relaytype.VerifyUnreadableTopic{Topic: topic, Error: err.Error()})
			continue
		case err != nil:
			return h, fmt.Errorf("nats sink: streams of %s: %w", filter, err)
		case len(streams) == 0:
			h.Missing = append(h.Missing, topic)
			continue
		}
		tr := topicRead{rg: relaytype.VerifyTopicRange{Topic: topic}, buckets: map[int32]int{}}
		for _, name := range streams {
			err := tr.readStream(ctx, js, name, since, each)
			if unreadable(err) {
				h.Unreadable = append(h.Unreadable, relaytype.VerifyUnreadableTopic{Topic: topic, Error: err.Error()})
				break
			}
			if err != nil {
				return h, err
			}
		}
		h.Ranges = append(h.Ranges, tr.rg)
	}
	return h, nil
}

// streamsOf names the streams that capture subjects matching filter.
func streamsOf(ctx context.Context, js jetstream.JetStream, filter string) ([]string, error) {
	l := js.StreamNames(ctx, jetstream.WithStreamListSubject(filter))
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return nil, err
	}
	return names, nil
}

// unreadable reports an error of the server refusing the relay a read: a
// permission, or an API error (a consumer the stream refuses).
func unreadable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrPermissionViolation) || errors.As(err, &api)
}

// topicRead is the read of one topic in progress: the range read of each
// bucket so far (its index in rg.Partitions in buckets).
type topicRead struct {
	rg      relaytype.VerifyTopicRange
	buckets map[int32]int
}

// readStream reads the messages of the topic's subjects in the stream
// name through an ephemeral consumer (no acknowledgement, deleted at the
// end): as many as it counted pending when it was made, from since on.
func (tr *topicRead) readStream(ctx context.Context, js jetstream.JetStream, name string, since time.Time, each func(*publish.Record, publish.Place) error) error {
	topic := tr.rg.Topic
	cc := jetstream.ConsumerConfig{
		FilterSubject:     topic + ".*",
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	}
	if !since.IsZero() {
		cc.DeliverPolicy, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := js.CreateConsumer(ctx, name, cc)
	if err != nil {
		return err
	}
	defer func() { _ = js.DeleteConsumer(context.WithoutCancel(ctx), name, cons.CachedInfo().Name) }()
	left := cons.CachedInfo().NumPending
	if left == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(int(min(left, 1000))))
	if err != nil {
		return err
	}
	defer it.Stop()
	var (
		rec publish.Record
		hs  []publish.Header
	)
	for left > 0 {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("nats sink: read %s: %w", name, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("nats sink: read %s: %w", name, err)
		}
		left--
		if meta.NumPending == 0 {
			// Deleted since the count: nothing more to wait for.
			left = 0
		}
		bucket, err := strconv.ParseInt(strings.TrimPrefix(m.Subject(), topic+"."), 10, 32)
		if err != nil {
			continue // not a subject the relay writes
		}
		at := publish.Place{Partition: int32(bucket), Offset: int64(meta.Sequence.Stream)}
		hs = hs[:0]
		var key []byte
		for k, vs := range m.Headers() {
			for _, v := range vs {
				hs = append(hs, publish.Header{Key: k, Value: []byte(v)})
				if k == contract.HeaderAggregateID {
					key = []byte(v)
				}
			}
		}
		rec = publish.Record{Topic: topic, Key: key, Value: m.Data(), Headers: hs, Timestamp: meta.Timestamp}
		if err := each(&rec, at); err != nil {
			return err
		}
		tr.add(at)
	}
	return nil
}

// add widens the range read of at's bucket to at.
func (tr *topicRead) add(at publish.Place) {
	i, ok := tr.buckets[at.Partition]
	if !ok {
		tr.buckets[at.Partition] = len(tr.rg.Partitions)
		tr.rg.Partitions = append(tr.rg.Partitions, relaytype.VerifyPartitionRange{Partition: at.Partition, Start: at.Offset, End: at.Offset + 1})
		return
	}
	pr := &tr.rg.Partitions[i]
	pr.Start, pr.End = min(pr.Start, at.Offset), max(pr.End, at.Offset+1)
}
