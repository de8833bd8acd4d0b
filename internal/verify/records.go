package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// readRecords reads the routed topics (and the dead-letter topic) from the
// first offset whose timestamp is at or after From minus Margin (the record
// timestamp is the commit time, never before the row's created_at) up to
// the last stable offset listed when the read begins, read_committed, and
// sorts what it keeps of each record by message ID.
func (v *verifier) readRecords(ctx context.Context) error {
	c := v.c
	v.dlq = -1
	if c.DeadLetterTopic != "" {
		v.dlq = int64(v.topics.intern(c.DeadLetterTopic))
	}
	names := slices.Clone(v.topics.names)
	ranges, missing, err := ScanTopics(ctx, c.Kafka, names, c.From.Add(-c.Margin), c.Logger, v.addRecord)
	if err != nil {
		return err
	}
	v.rep.Topics = ranges
	for _, name := range missing {
		if int64(v.topics.index[name]) != v.dlq {
			v.rep.MissingTopics = append(v.rep.MissingTopics, name)
		}
	}
	return nil
}

// ScanTopics reads topics, read_committed, from the first offset of each
// partition whose timestamp is at or after since up to the last stable
// offset listed when the read begins, calling each for every record
// (control records not); an error of each ends the scan. It returns the
// ranges it read and the topics that do not exist. kafka are the client
// options that reach the brokers.
func ScanTopics(ctx context.Context, kafka []kgo.Opt, topics []string, since time.Time, log *slog.Logger, each func(*kgo.Record) error) (ranges []TopicRange, missing []string, err error) {
	if len(topics) == 0 {
		return nil, nil, nil
	}
	opts := append(slices.Clone(kafka),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The commit marker at the end of a transaction is how a
		// read_committed reader sees that it reached the end offset.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// One fetch of at most 4 MiB at a time: what kgo buffers is
		// part of verify's memory.
		kgo.FetchMaxBytes(4<<20),
		kgo.FetchMaxPartitionBytes(1<<20),
		kgo.MaxConcurrentFetches(1),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: list offsets by time: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: list end offsets: %w", err)
	}
	consume := map[string]map[int32]kgo.Offset{}
	// left holds the end offset of every partition still to read.
	left := map[string]map[int32]int64{}
	for _, name := range topics {
		tr := TopicRange{Topic: name}
		ps := ends[name]
		if unknown, ok := ps[-1]; len(ps) == 0 || ok && errors.Is(unknown.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, name)
			continue
		}
		for p, end := range ps {
			if end.Err != nil {
				return nil, nil, fmt.Errorf("verify: end offset of %s[%d]: %w", name, p, end.Err)
			}
			start, ok := starts.Lookup(name, p)
			if !ok || start.Err != nil {
				return nil, nil, fmt.Errorf("verify: offset by time of %s[%d]: %v", name, p, start.Err)
			}
			r := PartitionRange{Partition: p, Start: start.Offset, End: end.Offset}
			if r.Start > r.End {
				r.Start = r.End
			}
			tr.Partitions = append(tr.Partitions, r)
			if r.Start < r.End {
				if consume[name] == nil {
					consume[name], left[name] = map[int32]kgo.Offset{}, map[int32]int64{}
				}
				consume[name][p] = kgo.NewOffset().At(r.Start)
				left[name][p] = r.End
			}
		}
		slices.SortFunc(tr.Partitions, func(a, b PartitionRange) int { return int(a.Partition - b.Partition) })
		ranges = append(ranges, tr)
	}
	if len(consume) == 0 {
		return ranges, missing, nil
	}
	cl.AddConsumePartitions(consume)
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			var loss *kgo.ErrDataLoss
			if errors.As(err, &loss) {
				log.Warn("verify: records were deleted while being read", "topic", t, "partition", p, "error", err)
				return
			}
			if ferr == nil {
				ferr = fmt.Errorf("verify: read %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, nil, ferr
		}
		var eachErr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			end, ok := left[fp.Topic][fp.Partition]
			if !ok {
				return
			}
			for _, r := range fp.Records {
				if r.Offset >= end || eachErr != nil {
					break
				}
				if !r.Attrs.IsControl() {
					eachErr = each(r)
				}
				if r.Offset >= end-1 {
					done(cl, left, fp.Topic, fp.Partition)
					break
				}
			}
			// Everything up to the end was deleted while reading.
			if fp.LogStartOffset >= end {
				done(cl, left, fp.Topic, fp.Partition)
			}
		})
		if eachErr != nil {
			return nil, nil, eachErr
		}
	}
	return ranges, missing, nil
}

// done marks a partition read to its end offset.
func done(cl *kgo.Client, left map[string]map[int32]int64, topic string, p int32) {
	if _, ok := left[topic][p]; !ok {
		return
	}
	cl.PauseFetchPartitions(map[string][]int32{topic: {p}})
	delete(left[topic], p)
	if len(left[topic]) == 0 {
		delete(left, topic)
	}
}

// addRecord keeps what verify needs of r.
func (v *verifier) addRecord(r *kgo.Record) error {
	v.rep.RecordsRead++
	e := recordEntry{topic: v.topics.index[r.Topic], partition: r.Partition, offset: r.Offset,
		timestamp: r.Timestamp.UnixMilli(), key: string(r.Key)}
	var idOK bool
	for _, h := range r.Headers {
		switch h.Key {
		case contract.HeaderMessageID:
			id, err := uuid.ParseBytes(h.Value)
			e.id, idOK = id, err == nil
		case contract.HeaderBusinessKey:
			e.businessKey, e.hasBK = string(h.Value), true
		}
	}
	if !idOK {
		v.rep.RecordsWithoutID++
		return nil
	}
	return v.records.add(e)
}
