package producer

import (
	"context"
	"log/slog"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// How record batches are sized: the broker refuses a record batch over
// the topic's max.message.bytes (which defaults to the broker's
// message.max.bytes, 1,048,588 on a stock Kafka) whole. Before the first
// write to a topic the producer reads both, and kgo cuts the topic's
// batches under the lower one, less a margin of 1/128 (compression may
// grow incompressible data a little).
const (
	// recordOverhead bounds what a record adds to a batch beyond its key,
	// value and headers' bytes, for the batch limit of a topic whose
	// max.message.bytes cannot be read.
	recordOverhead = 4096
	// requestOverhead is what a produce request adds to its record
	// batches (header, client ID, transactional ID, topic and partition
	// prefixes), with room to spare.
	requestOverhead = 16 << 10
	// maxTopics bounds the topics whose limit is kept; past it the cache
	// starts afresh (kgo reads the limit once per partition anyway).
	maxTopics = 4096
	// minBatchBytes and maxBatchBytes are what kgo accepts.
	minBatchBytes = 512
	maxBatchBytes = 1 << 30
)

// topicLimits is the batch limit of each topic written.
type topicLimits struct {
	def    int32 // when the topic's limit is unknown
	mu     sync.Mutex
	topics map[string]int32 // 0: read, unknown
}

func newTopicLimits(maxMessageBytes int) *topicLimits {
	return &topicLimits{def: clampBatch(maxMessageBytes + recordOverhead), topics: make(map[string]int32)}
}

// batchMax is kgo's ProducerBatchMaxBytesFn.
func (l *topicLimits) batchMax(topic string) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.topics[topic]; n > 0 {
		return n
	}
	return l.def
}

// writeMax is kgo's BrokerMaxWriteBytes: the default batch limit (the
// largest record the caller sends, with its overhead) plus a request's
// overhead. kgo cuts a topic's batches under the lower of the topic's
// limit and this less the request's overhead, so every record up to
// MaxMessageBytes still fits in a batch of its own, and a request holds
// one batch of a topic whose limit is higher, or a few smaller ones: its
// buffer, which kgo keeps in a pool, stays near one batch (a request of
// every partition's batches was ~2.5 MB at 5,000 small records).
func (l *topicLimits) writeMax() int32 {
	return min(l.def, maxBatchBytes-requestOverhead) + requestOverhead
}

// learn reads topic's limit from the cluster, once: the topic's
// max.message.bytes and its first partition leader's message.max.bytes.
// It never fails for want of an answer (the limit stays the default); only
// ctx's end is an error.
func (l *topicLimits) learn(ctx context.Context, cl *kgo.Client, topic string, autoCreate bool, log *slog.Logger) error {
	l.mu.Lock()
	_, known := l.topics[topic]
	l.mu.Unlock()
	if known {
		return nil
	}
	limit := readLimit(ctx, cl, topic, autoCreate)
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.topics) >= maxTopics {
		clear(l.topics)
	}
	if limit > 0 {
		l.topics[topic] = clampBatch(limit - limit/128)
	} else {
		l.topics[topic] = 0
		log.Debug("cannot read the topic's max.message.bytes; record batches stay near max message bytes", "topic", topic, "batch_bytes", l.def)
	}
	return nil
}

// readLimit reads topic's limit, 0 when it cannot. The metadata request
// creates the topic where allowed, as the write that follows would.
func readLimit(ctx context.Context, cl *kgo.Client, topic string, autoCreate bool) int {
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = autoCreate
	mres, err := md.RequestWith(ctx, cl)
	if err != nil || len(mres.Topics) != 1 || mres.Topics[0].ErrorCode != 0 || len(mres.Topics[0].Partitions) == 0 {
		return 0
	}
	leader := mres.Topics[0].Partitions[0].Leader
	limit := describe(ctx, cl, kmsg.ConfigResourceTypeTopic, topic, "max.message.bytes")
	if b := describe(ctx, cl, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(leader)), "message.max.bytes"); b > 0 && (limit == 0 || b < limit) {
		limit = b
	}
	return limit
}

// describe reads the integer config name of a resource; 0 when it cannot.
func describe(ctx context.Context, cl *kgo.Client, typ kmsg.ConfigResourceType, name, config string) int {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, []string{config}
	req.Resources = append(req.Resources, r)
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0
	}
	for _, rr := range res.Resources {
		if rr.ErrorCode != 0 {
			return 0
		}
		for _, c := range rr.Configs {
			if c.Name == config && c.Value != nil {
				if n, err := strconv.Atoi(*c.Value); err == nil && n > minBatchBytes {
					return n
				}
			}
		}
	}
	return 0
}

func clampBatch(n int) int32 {
	return int32(min(max(n, minBatchBytes), maxBatchBytes))
}
