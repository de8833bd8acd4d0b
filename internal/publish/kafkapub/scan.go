package kafkapub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// scanner is ScanTopics' read in progress: what it read so far.
type scanner struct{ publish.Holdings }

// ScanTopics reads topics from the first offset of each partition whose
// timestamp is at or after since up to the high watermark listed when the
// read begins, calling each for every record written outside a
// transaction or in one whose commit marker it read (control records
// not); an error of each ends the scan. Records of an aborted transaction
// and of one still open at the end of the read are not present.
//
// It reads read_uncommitted and judges each transactional record by its
// producer's next marker, as producer.ReadLast does: a read_committed
// read stops at the last stable offset, the first offset of the oldest
// transaction still open, so one transaction left open on a topic that
// several relays write (a relay that died inside a commit, until its
// successor fences it or the brokers time it out) hid every record after
// it: verify reported their rows missing, and recovery published them
// again. A topic that does
// not exist, or that the brokers do not let it describe or read, is named
// in the result and skipped; the others are read. kafka are the client
// options that reach the brokers.
func ScanTopics(ctx context.Context, kafka []kgo.Opt, topics []string, since time.Time, log *slog.Logger, each func(*kgo.Record) error) (publish.Holdings, error) {
	var scan scanner
	if len(topics) == 0 {
		return scan.Holdings, nil
	}
	opts := append(slices.Clone(kafka),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		// The markers decide each transaction's records (committedOnly).
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
		return scan.Holdings, fmt.Errorf("kafka: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	readable, err := scan.lookUp(ctx, adm, topics)
	if err != nil {
		return scan.Holdings, err
	}
	consume, left, err := scan.plan(ctx, adm, since, readable)
	if err != nil || len(consume) == 0 {
		return scan.Holdings, err
	}
	cl.AddConsumePartitions(consume)
	err = scan.consume(ctx, cl, left, log, producer.CommittedOnly(each))
	return scan.Holdings, err
}

// lookUpChunk is how many topics one metadata request of lookUp names.
const lookUpChunk = 1000

// unreadable names a topic the brokers do not let the client read.
func (scan *scanner) unreadable(topic string, err error) {
	scan.Unreadable = append(scan.Unreadable, relaytype.VerifyUnreadableTopic{Topic: topic, Error: err.Error()})
}

// lookUp describes topics: those that do not exist are Missing, those the
// brokers refuse to describe Unreadable, and the others returned.
// The topics are described lookUpChunk at a time: one metadata request
// for every topic of a verify that routes to 100,000 distinct names is
// 25 MB, and a loaded broker answers it after the client's read timeout.
func (scan *scanner) lookUp(ctx context.Context, adm *kadm.Client, topics []string) ([]string, error) {
	var readable []string
	for chunk := range slices.Chunk(topics, lookUpChunk) {
		tds, err := adm.ListTopics(ctx, chunk...)
		if err != nil {
			return nil, fmt.Errorf("kafka: look up topics: %w", err)
		}
		for _, name := range chunk {
			switch td, ok := tds[name]; {
			case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
				scan.Missing = append(scan.Missing, name)
			case td.Err != nil:
				scan.unreadable(name, td.Err)
			default:
				readable = append(readable, name)
			}
		}
	}
	return readable, nil
}

// plan lists the offset range of every partition of readable into
// scan.Ranges, and returns where to start consuming each partition with
// records in its range and, in left, its end offset.
func (scan *scanner) plan(ctx context.Context, adm *kadm.Client, since time.Time, readable []string) (map[string]map[int32]kgo.Offset, map[string]map[int32]int64, error) {
	starts, ends, err := listRanges(ctx, adm, since, readable, scan.unreadable)
	if err != nil {
		return nil, nil, err
	}
	consume := map[string]map[int32]kgo.Offset{}
	left := map[string]map[int32]int64{}
	for _, name := range readable {
		ps, ok := ends[name]
		if !ok {
			continue // unreadable
		}
		tr := relaytype.VerifyTopicRange{Topic: name}
		if unknown, ok := ps[-1]; len(ps) == 0 || ok && errors.Is(unknown.Err, kerr.UnknownTopicOrPartition) {
			scan.Missing = append(scan.Missing, name)
			continue
		}
		for p, end := range ps {
			if end.Err != nil {
				return nil, nil, fmt.Errorf("kafka: end offset of %s[%d]: %w", name, p, end.Err)
			}
			start, ok := starts.Lookup(name, p)
			if !ok || start.Err != nil {
				return nil, nil, fmt.Errorf("kafka: offset by time of %s[%d]: %v", name, p, start.Err)
			}
			r := relaytype.VerifyPartitionRange{Partition: p, Start: start.Offset, End: end.Offset}
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
		slices.SortFunc(tr.Partitions, func(a, b relaytype.VerifyPartitionRange) int { return int(a.Partition - b.Partition) })
		scan.Ranges = append(scan.Ranges, tr)
	}
	return consume, left, nil
}

// consume polls until every partition in left is read to its end offset,
// calling each for every record before it, control records included.
func (scan *scanner) consume(ctx context.Context, cl *kgo.Client, left map[string]map[int32]int64, log *slog.Logger, each func(*kgo.Record) error) error {
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			var loss *kgo.ErrDataLoss
			switch {
			case errors.As(err, &loss):
				log.Warn("kafka: records were deleted while being read", "topic", t, "partition", p, "error", err)
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				// Described but not readable: skip the topic.
				if _, ok := left[t]; ok {
					scan.unreadable(t, err)
					for p := range left[t] {
						done(cl, left, t, p)
					}
				}
			case ferr == nil:
				ferr = fmt.Errorf("kafka: read %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
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
				eachErr = each(r)
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
			return eachErr
		}
	}
	return nil
}

// listRanges lists the start (by timestamp since) and end offsets of the
// partitions of topics. A topic whose offsets the brokers refuse to list
// (kadm returns an authorization error for the whole request) is found by
// listing each topic alone, passed to unreadable and left out.
func listRanges(ctx context.Context, adm *kadm.Client, since time.Time, topics []string, unreadable func(string, error)) (kadm.ListedOffsets, kadm.ListedOffsets, error) {
	starts, ends := kadm.ListedOffsets{}, kadm.ListedOffsets{}
	list := func(topics ...string) error {
		s, err := adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), topics...)
		if err != nil {
			return fmt.Errorf("kafka: list offsets by time: %w", err)
		}
		e, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return fmt.Errorf("kafka: list end offsets: %w", err)
		}
		maps.Copy(starts, s)
		maps.Copy(ends, e)
		return nil
	}
	if len(topics) == 0 {
		return starts, ends, nil
	}
	err := list(topics...)
	if err == nil || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return starts, ends, err
	}
	for _, topic := range topics {
		if err := list(topic); errors.Is(err, kerr.TopicAuthorizationFailed) {
			unreadable(topic, err)
		} else if err != nil {
			return nil, nil, err
		}
	}
	return starts, ends, nil
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
