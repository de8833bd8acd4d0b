package relay

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// How the sink sizes a write: each partition's share of one producer call
// goes out as one record batch, which must stay
// within what the broker accepts for the topic (max.message.bytes, which
// defaults to the broker's message.max.bytes, 1,048,588 on a stock
// Kafka). The broker measures the whole v2 record batch; the sink bounds
// it from above with batchCost.
const (
	// recordBatchHeader is the fixed part of a v2 record batch, which the
	// broker counts against its limit.
	recordBatchHeader = 61
	// topicInfoTTL is how long a topic's partition count and limit are
	// trusted before they are read again.
	topicInfoTTL = 30 * time.Second
)

// batchCost bounds the bytes m adds to a v2 record batch: key, value and
// headers, plus the most that the record's varint lengths, attributes and
// deltas can take (length 5, attributes 1, timestamp delta 10, offset
// delta 5, key and value lengths 5 each, header count 5; 10 per header).
func batchCost(m *kafka.Message) int64 {
	n := 36 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// shareLimit is the most batchCost one partition's share of a write may
// sum to under a broker limit of limit bytes per record batch: the limit
// less the batch header and a margin of 1/128 (compression may grow
// incompressible data a little).
func shareLimit(limit int) int64 {
	return int64(limit - recordBatchHeader - limit/128)
}

// topicInfo is what the sink knows of a topic.
type topicInfo struct {
	// partitions is the topic's partition count; 0 when unknown (the
	// topic does not exist yet, or may not be described), and then every
	// record of the topic counts against one share.
	partitions int
	// maxShare is the most batchCost a partition's share of one write may
	// sum to.
	maxShare int64
	// limit is the topic's max.message.bytes (or the broker's
	// message.max.bytes, when lower), 0 when neither could be read.
	limit   int
	expires time.Time
}

// topicLimits reads and caches the partition count and the size limit of
// the topics the sink writes to.
type topicLimits struct {
	cfg       *Config
	client    *kafka.Client
	transport *kafka.Transport
	mu        sync.Mutex
	topics    map[string]topicInfo
	warned    map[string]bool // topics whose limit could not be read, logged once
}

func newTopicLimits(c *Config, transport *kafka.Transport) *topicLimits {
	return &topicLimits{
		cfg:       c,
		client:    &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: transport, Timeout: c.WriteTimeout},
		transport: transport,
		topics:    make(map[string]topicInfo),
		warned:    make(map[string]bool),
	}
}

// get returns what is known of topic, reading it from the cluster when
// unknown or older than topicInfoTTL. Without a partition count the answer
// is read again at the next call. It never fails: what cannot be read is
// assumed conservatively (one share per topic, a limit of
// Config.MaxMessageBytes).
func (l *topicLimits) get(ctx context.Context, topic string) topicInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if ti, ok := l.topics[topic]; ok && now.Before(ti.expires) {
		return ti
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.WriteTimeout)
	defer cancel()
	ti := topicInfo{expires: now.Add(topicInfoTTL)}
	var leader int
	ti.partitions, leader = l.partitions(ctx, topic)
	if ti.partitions > 0 {
		// The topic's value is the effective one on a real Kafka; the
		// broker's message.max.bytes too is read, and the lower one
		// taken, in case the cluster reports the topic's default only.
		ti.limit = l.describe(ctx, kafka.ResourceTypeTopic, topic, "max.message.bytes")
		if b := l.describe(ctx, kafka.ResourceTypeBroker, strconv.Itoa(leader), "message.max.bytes"); b > 0 && (ti.limit == 0 || b < ti.limit) {
			ti.limit = b
		}
	} else {
		ti.expires = now
	}
	limit := ti.limit
	if limit <= 0 {
		limit = l.cfg.MaxMessageBytes
		if ti.partitions > 0 && !l.warned[topic] {
			l.warned[topic] = true
			l.cfg.Logger.Info("cannot read the topic's max.message.bytes (DescribeConfigs); batches stay under max message bytes",
				"topic", topic, "max_message_bytes", limit)
		}
	} else if l.cfg.MaxMessageBytes > limit && !l.warned[topic] {
		l.warned[topic] = true
		l.cfg.Logger.Warn("max message bytes is above the topic's max.message.bytes: records between the two are rejected by the broker (dead-lettered)",
			"topic", topic, "max_message_bytes", l.cfg.MaxMessageBytes, "topic_max_message_bytes", limit)
	}
	ti.maxShare = shareLimit(limit)
	l.topics[topic] = ti
	return ti
}

// partitions reads topic's partition count, 0 when it cannot, and the
// leader of its first partition, as the producer reads it (readTopic:
// allowing topic auto-creation, since the write that follows would create
// the topic anyway).
func (l *topicLimits) partitions(ctx context.Context, topic string) (n, leader int) {
	_, t, err := readTopic(ctx, l.transport, l.client.Addr, topic)
	if err != nil {
		return 0, 0
	}
	return len(t.Partitions), int(t.Partitions[0].LeaderID)
}

// describe reads the integer config name of a resource; 0 when it cannot.
func (l *topicLimits) describe(ctx context.Context, typ kafka.ResourceType, resource, name string) int {
	res, err := l.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: typ, ResourceName: resource, ConfigNames: []string{name}}},
	})
	if err != nil {
		return 0
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			return 0
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == name {
				if n, err := strconv.Atoi(e.ConfigValue); err == nil && n > recordBatchHeader {
					return n
				}
			}
		}
	}
	return 0
}
