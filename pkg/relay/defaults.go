package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/pgtls"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// slotNamePattern is what Postgres accepts as a replication slot name.
var slotNamePattern = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// WithDefaults returns a copy of cfg (nil: the zero Config) with every zero field set to its
// default, and validates it: the error wraps relaytype.ErrConfig and names every
// problem at once. Brokers are not required here (Setup, Status and
// Teardown do without them); see CheckBrokers. New and every function of
// package relay call it; a caller may, to see the effective
// configuration.
func (cfg *Config) WithDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.setDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c.checkNames(bad)
	c.checkPolicies(bad)
	c.checkKafka(bad)
	c.checkBounds(bad)
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", relaytype.ErrConfig, errors.Join(errs...))
	}
	return c, nil
}

// CheckBrokers is the extra check of the configurations that talk to
// Kafka: Brokers is required (unless Sink names another broker).
func (c *Config) CheckBrokers() error {
	if len(c.Kafka.Brokers) == 0 && (c.Sink == "" || c.Sink == kafkapub.Name) {
		return fmt.Errorf("%w: brokers are required", relaytype.ErrConfig)
	}
	return nil
}

// setDefaults sets every zero field that has a default.
func (c *Config) setDefaults() {
	setDefault(&c.Table, DefaultTable)
	setDefault(&c.Slot, DefaultSlot)
	setDefault(&c.Publication, DefaultPublication)
	setDefault(&c.TableFormat, relaytype.TableFormatPgoutbox)
	setDefault(&c.TopicTemplate, tableformat.Shape(c.TableFormat).TopicTemplate)
	if c.CloudEvents && c.CloudEventsSource == "" {
		c.CloudEventsSource = tableformat.DefaultCloudEventsSource(c.DatabaseURL, c.Table)
	}
	setDefault(&c.DeadLetterTopic, DefaultDeadLetterTopic)
	setDefault(&c.OnInvalid, InvalidDeadLetter)
	setDefault(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.BufferBytes, DefaultBufferBytes)
	setDefault(&c.RetryBackoff, DefaultRetryBackoff)
	setDefault(&c.MaxRetryBackoff, DefaultMaxRetryBackoff)
	setDefault(&c.TopicUnavailableGrace, DefaultTopicUnavailableGrace)
	setDefault(&c.OnUnavailableTopic, UnavailableDeadLetter)
	setDefault(&c.StatusInterval, DefaultStatusInterval)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.PruneInterval, DefaultPruneInterval)
	setDefault(&c.PruneBatchSize, DefaultPruneBatchSize)
	setDefault(&c.OnGap, GapStop)
	setDefault(&c.BackfillMargin, DefaultBackfillMargin)
	setDefault(&c.LagPollInterval, DefaultLagPollInterval)
	setDefault(&c.StandbyRetryInterval, DefaultStandbyRetryInterval)
	c.Kafka.setDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		c.MaxRetryBackoff = c.RetryBackoff
	}
}

// setDefaults sets every zero field of the Kafka group that has a
// default.
func (k *KafkaConfig) setDefaults() {
	setDefault(&k.Compression, "none")
	setDefault(&k.WriteTimeout, DefaultWriteTimeout)
	setDefault(&k.ProgressTopic, contract.DefaultProgressTopic)
	setDefault(&k.TransactionTimeout, DefaultTransactionTimeout)
}

// checkNames checks the database URL and the names: table, format, slot,
// topics, topic template.
func (c *Config) checkNames(bad func(string, ...any)) {
	if c.Sink != "" && !slices.Contains(publish.Names(), c.Sink) {
		bad("sink %q: no such sink (registered: %s)", c.Sink, strings.Join(publish.Names(), ", "))
	}
	c.checkSinkURL(bad)
	if c.DatabaseURL == "" {
		bad("database URL is required")
	} else if c.RequireTLS {
		if ws, err := pgtls.Check(c.DatabaseURL); err == nil && len(ws) > 0 {
			bad("require TLS: the database URL allows %s; use sslmode=verify-full (or verify-ca) with sslrootcert", pgtls.Describe(ws))
		}
	}
	if _, err := pgname.Parse(c.Table, "public"); err != nil {
		bad("table: %v", err)
	}
	if _, ok := tableformat.TableShapes[c.TableFormat]; !ok {
		bad("table format %q: want one of %s", c.TableFormat, tableformat.FormatList())
	}
	if !slotNamePattern.MatchString(c.Slot) {
		bad("slot %q: want 1 to 63 characters of a-z, 0-9 and _", c.Slot)
	}
	if err := contract.CheckTopic([]byte(c.DeadLetterTopic)); err != nil {
		bad("dead-letter topic: %v", err)
	}
	for _, p := range c.AllowedTopics {
		if err := contract.CheckTopic([]byte(p)); err != nil {
			bad("allowed topic prefix: %v", err)
		}
	}
	if err := tableformat.ParseTopicTemplate(c.TopicTemplate).Check(); err != nil {
		bad("topic template %q: %v", c.TopicTemplate, err)
	}
}

// checkPolicies checks the three policies.
func (c *Config) checkPolicies(bad func(string, ...any)) {
	if c.OnInvalid != InvalidDeadLetter && c.OnInvalid != InvalidStop {
		bad("on-invalid %q: want %q or %q", c.OnInvalid, InvalidDeadLetter, InvalidStop)
	}
	if c.OnUnavailableTopic != UnavailableDeadLetter && c.OnUnavailableTopic != UnavailableStop {
		bad("on-unavailable-topic %q: want %q or %q", c.OnUnavailableTopic, UnavailableDeadLetter, UnavailableStop)
	}
	if c.OnGap != GapStop && c.OnGap != GapBackfill {
		bad("on-gap %q: want %q or %q", c.OnGap, GapStop, GapBackfill)
	}
}

// checkKafka checks the Kafka group: the compression, the progress topic
// and SASL.
func (c *Config) checkKafka(bad func(string, ...any)) {
	if !slices.Contains(Compressions, strings.ToLower(c.Kafka.Compression)) {
		bad("compression %q: want one of %s", c.Kafka.Compression, strings.Join(Compressions, ", "))
	}
	if c.ExactlyOnce {
		if err := contract.CheckTopic([]byte(c.Kafka.ProgressTopic)); err != nil {
			bad("progress topic: %v", err)
		} else if c.Kafka.ProgressTopic == c.DeadLetterTopic {
			bad("progress topic %s is the dead-letter topic: give each its own", c.Kafka.ProgressTopic)
		}
	}
	if c.Kafka.SASL != nil {
		if err := c.Kafka.SASL.Check(); err != nil {
			bad("%v", err)
		}
	}
}

// checkBounds refuses negative durations and sizes.
func (c *Config) checkBounds(bad func(string, ...any)) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"batch timeout", c.BatchTimeout}, {"write timeout", c.Kafka.WriteTimeout}, {"retry backoff", c.RetryBackoff},
		{"status interval", c.StatusInterval}, {"shutdown timeout", c.ShutdownTimeout}, {"prune interval", c.PruneInterval},
		{"prune after", c.PruneAfter}, {"lag poll interval", c.LagPollInterval},
		{"standby retry interval", c.StandbyRetryInterval}, {"heartbeat interval", c.HeartbeatInterval},
		{"topic unavailable grace", c.TopicUnavailableGrace}, {"backfill margin", c.BackfillMargin},
		{"transaction timeout", c.Kafka.TransactionTimeout}} {
		if d.v < 0 {
			bad("%s %v is negative", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max message bytes", c.MaxMessageBytes}, {"batch size", c.BatchSize},
		{"buffer bytes", c.BufferBytes}, {"prune batch size", c.PruneBatchSize}} {
		if n.v < 0 {
			bad("%s %d is negative", n.name, n.v)
		}
	}
}

// setDefault sets *p to def when it is the zero value.
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
