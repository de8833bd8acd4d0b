package relaycli

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// reservedTopics are the topics the relays of a fleet write themselves:
// every source's dead-letter and progress topics. No source's row may
// publish to one (relay.Config.ReservedTopic), so one tenant's producers
// cannot write fake dead letters or progress into another's topics. The
// set follows the file: a reload that adds a source reserves its topics
// for the sources already running too.
type reservedTopics struct {
	topics atomic.Pointer[map[string]bool]
}

// set makes the topics of sources the reserved ones.
func (r *reservedTopics) set(sources []fleetSource) {
	m := make(map[string]bool, 2*len(sources))
	for _, s := range sources {
		m[orDefault(s.Config.DeadLetterTopic, relay.DefaultDeadLetterTopic)] = true
		m[orDefault(s.Config.Kafka.ProgressTopic, contract.DefaultProgressTopic)] = true
	}
	r.topics.Store(&m)
}

// has reports whether topic is reserved; relay.Config.ReservedTopic.
func (r *reservedTopics) has(topic string) bool {
	m := r.topics.Load()
	return m != nil && (*m)[topic]
}

// orDefault is v, or def when v is empty.
func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// flagStrictTopics is relay run --config's refusal of a fleet whose
// sources may publish anywhere.
const flagStrictTopics = "strict-topics"

// strictTopicsFlag is relay run's --strict-topics.
func strictTopicsFlag() cli.Flag {
	return boolFlag(flagStrictTopics, catOps,
		"with --config: refuse a fleet of several sources where one has no allowed-topics (each source's rows may then publish to any topic, another tenant's included); without it, a warning")
}

// checkTopicBounds warns (or with strict refuses) when a fleet of several
// sources has a source without allowed-topics: its producers may write to
// any topic but the reserved ones, another source's business topics
// included.
func checkTopicBounds(sources []fleetSource, strict bool, logger *slog.Logger) error {
	if len(sources) < 2 {
		return nil
	}
	var open []string
	for _, s := range sources {
		if len(s.Config.AllowedTopics) == 0 {
			open = append(open, s.Name)
		}
	}
	if len(open) == 0 {
		return nil
	}
	const why = "without allowed-topics, a source's rows may publish to any topic, another source's included; give each source the prefixes of its own topics"
	if strict {
		return usagef("--%s: sources without allowed-topics: %s (%s)", flagStrictTopics, strings.Join(open, ", "), why)
	}
	logger.Warn(fmt.Sprintf("sources without allowed-topics: %s", strings.Join(open, ", ")), "why", why, "refuse", "--"+flagStrictTopics)
	return nil
}
