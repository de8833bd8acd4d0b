package relaycli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// spreadConfig is a fleet file's spread: section: the replicas running the
// file share its sources out through a Kafka consumer group.
type spreadConfig struct {
	// Group is the consumer group of the replicas (required).
	Group string `yaml:"group"`
	// SessionTimeout is how long a replica may be silent before its
	// sources move to the others.
	SessionTimeout string `yaml:"session-timeout"`
}

// Defaults of spread:.
const (
	defaultSessionTimeout = 10 * time.Second
	minSessionTimeout     = 6 * time.Second
	// spreadTopicPrefix names the group's topic: one partition per source,
	// never written; the group's assignment of its partitions is the
	// assignment of the sources.
	spreadTopicPrefix = contract.FleetTopicPrefix
)

// spread is a validated spread: section.
type spread struct {
	group          string
	sessionTimeout time.Duration
}

// parse validates s.
func (s *spreadConfig) parse() (*spread, error) {
	if s == nil {
		return nil, nil
	}
	if s.Group == "" {
		return nil, errors.New("group: required (the Kafka consumer group the replicas running this file join)")
	}
	if !sourceName.MatchString(s.Group) {
		return nil, fmt.Errorf("group: %q may hold only lower case letters, digits, '_', '.' and '-', at most 63", s.Group)
	}
	sp := &spread{group: s.Group, sessionTimeout: defaultSessionTimeout}
	if s.SessionTimeout != "" {
		d, err := time.ParseDuration(s.SessionTimeout)
		if err != nil || d < minSessionTimeout {
			return nil, fmt.Errorf("session-timeout: %q is not a duration of at least %s (Kafka's default group.min.session.timeout.ms)", s.SessionTimeout, minSessionTimeout)
		}
		sp.sessionTimeout = d
	}
	return sp, nil
}

// topic is the group's topic.
func (s *spread) topic() string { return spreadTopicPrefix + s.group }

// assignment maps the group's partitions to sources: partition i is the
// i-th source of the file. Every replica running the same file computes
// the same map; a source appended to the file moves no other.
func assignment(sources []fleetSource) map[int32]string {
	m := make(map[int32]string, len(sources))
	for i, s := range sources {
		m[int32(i)] = s.Name
	}
	return m
}

// member is this replica's membership of the spread group: it joins the
// group, keeps the topic's partition count at least the number of sources,
// and tells the fleet which partitions it owns.
type member struct {
	sp     *spread
	logger *slog.Logger
	cl     *kgo.Client
	adm    *kadm.Client
}

// join creates the group's topic if missing, and joins the group with the
// Kafka settings of the first source: onChange receives the partitions
// this replica owns after every assignment, revocation or loss, and must
// have stopped the sources it no longer owns when it returns.
func join(ctx context.Context, sp *spread, sources []fleetSource, logger *slog.Logger, onChange func(owned []int32)) (*member, error) {
	first := sources[0].Config
	admin, err := kgo.NewClient(relay.KafkaClientOpts(first)...)
	if err != nil {
		return nil, err
	}
	m := &member{sp: sp, logger: logger, adm: kadm.NewClient(admin)}
	if err := m.ensurePartitions(ctx, len(sources)); err != nil {
		admin.Close()
		return nil, err
	}
	var owned []int32
	topic := sp.topic()
	update := func(add, remove []int32) {
		owned = slices.DeleteFunc(owned, func(p int32) bool { return slices.Contains(remove, p) })
		for _, p := range add {
			if !slices.Contains(owned, p) {
				owned = append(owned, p)
			}
		}
		slices.Sort(owned)
		onChange(slices.Clone(owned))
	}
	m.cl, err = kgo.NewClient(relay.KafkaClientOpts(first,
		kgo.ConsumerGroup(sp.group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(sp.sessionTimeout),
		kgo.HeartbeatInterval(sp.sessionTimeout/5),
		kgo.DisableAutoCommit(),
		// New partitions (new sources) are noticed, and rebalanced, this soon.
		kgo.MetadataMaxAge(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			logger.Info("spread: sources assigned to this replica", "partitions", ps[topic])
			update(ps[topic], nil)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps[topic]) > 0 {
				logger.Info("spread: sources moving to another replica", "partitions", ps[topic])
			}
			update(nil, ps[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if len(ps[topic]) > 0 {
				logger.Warn("spread: sources lost (this replica left the group; another may lead them now)", "partitions", ps[topic])
			}
			update(nil, ps[topic])
		}),
	)...)
	if err != nil {
		admin.Close()
		return nil, err
	}
	go m.poll(ctx)
	return m, nil
}

// ensurePartitions creates the group's topic with n partitions, or adds
// partitions until it has n. It never removes any: a partition without a
// source is owned by a replica that leads nothing for it.
func (m *member) ensurePartitions(ctx context.Context, n int) error {
	topic := m.sp.topic()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	details, err := m.adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("spread: list topic %s: %w", topic, err)
	}
	td, ok := details[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		resp, err := m.adm.CreateTopic(ctx, int32(n), -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("spread: create topic %s (%d partitions): %w", topic, n, err)
		}
		return nil
	}
	if td.Err != nil {
		return fmt.Errorf("spread: topic %s: %w", topic, td.Err)
	}
	if have := len(td.Partitions); have < n {
		resp, err := m.adm.UpdatePartitions(ctx, n, topic)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("spread: grow topic %s from %d to %d partitions: %w", topic, have, n, err)
		}
		m.logger.Info("spread: topic grown for the new sources", "topic", topic, "partitions", n)
	}
	return nil
}

// poll keeps the consumer polling (the topic holds no records) so the
// group's errors reach the log.
func (m *member) poll(ctx context.Context) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				m.logger.Error("spread: group error (this replica leads nothing until it joins)", "topic", topic, "partition", p, "error", err)
			}
		})
	}
}

// close leaves the group (its sources move at once, not after the session
// timeout) and closes the clients.
func (m *member) close() {
	m.cl.Close()
	m.adm.Close()
}
