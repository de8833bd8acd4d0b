package relaycli

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// databaseConfig validates the shared flags and returns a Config holding
// them, and a logger writing to stderr. It teaches sc the database password
// before anything can print it.
func databaseConfig(c *cli.Context, sc *scrubber) (*relay.Config, error) {
	secret, err := cliutil.ReadSecret(c, flagDatabaseURL, envName(flagDatabaseURL))
	if err != nil {
		return nil, err
	}
	url := secret.Value
	if url == "" {
		return nil, usagef("--%s (or %s) is required", flagDatabaseURL, envVar(flagDatabaseURL)[0])
	}
	pg, err := pgconn.ParseConfig(url)
	if err != nil {
		// pgconn redacts the password only as far as it could parse
		// the string: the error shows none of it.
		sc.addURL(url)
		return nil, usagef("--%s: %v", flagDatabaseURL, redact.ParseError(url, err))
	}
	sc.add(pg.Password)
	sc.addURL(url)
	if cliutil.URLExposed(secret) {
		sc.exposed = append(sc.exposed, flagDatabaseURL)
	}

	cfg := &relay.Config{
		DatabaseURL: url,
		Table:       c.String(flagTable),
		Slot:        c.String(flagSlot),
		Publication: c.String(flagPublication),
		RequireTLS:  c.Bool(flagRequireTLS),
	}
	if _, err := pgname.Parse(cfg.Table, "public"); err != nil {
		return nil, usagef("--%s: %v", flagTable, err)
	}
	cfg.TableFormat = relaytype.TableFormat(c.String(flagTableFormat))
	if !slices.Contains(relaytype.TableFormats, cfg.TableFormat) {
		return nil, usagef("--%s: %q is not one of %s", flagTableFormat, cfg.TableFormat, relay.TableFormatList())
	}
	if err := checkSlotName(cfg.Slot); err != nil {
		return nil, usagef("--%s: %v", flagSlot, err)
	}
	if strings.TrimSpace(cfg.Publication) == "" {
		return nil, usagef("--%s must not be empty", flagPublication)
	}
	logger, err := newLogger(c.App.ErrWriter, c.String(flagLogLevel), c.String(flagLogFormat), sc)
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	return cfg, nil
}

// warnSecretFlags logs a warning for each secret given as a flag (a
// database URL holding a password, a SASL password), once the command's
// flags are known to be valid. The flags were read (files and all) while
// the configuration was built: sc remembers which secrets came as flags.
func warnSecretFlags(sc *scrubber, log *slog.Logger) {
	for _, flag := range sc.exposed {
		cliutil.WarnSecretFlag(log, flag, envName(flag))
	}
}

// checkSlotName accepts what Postgres accepts as a slot name: lower case
// letters, digits and underscores, at most 63 bytes.
func checkSlotName(name string) error {
	if name == "" {
		return fmt.Errorf("must not be empty")
	}
	if len(name) > 63 {
		return fmt.Errorf("%q is longer than 63 bytes", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("%q may contain only lower case letters, digits and underscores", name)
		}
	}
	return nil
}

// runConfig validates every flag of `relay run` and returns the Config.
func runConfig(c *cli.Context, sc *scrubber) (*relay.Config, error) {
	cfg, err := databaseConfig(c, sc)
	if err != nil {
		return nil, err
	}
	if err := sinkConfig(c, sc, cfg); err != nil {
		return nil, err
	}
	if err := kafkaConfig(c, cfg); err != nil {
		return nil, err
	}
	if err := limitsConfig(c, cfg); err != nil {
		return nil, err
	}
	if err := kafkaSecurity(c, sc, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// streamingConfig validates the flags only relay run has (streamingFlags)
// into cfg.
func streamingConfig(c *cli.Context, cfg *relay.Config) error {
	cfg.NoCreate = c.Bool(flagNoCreate)
	cfg.FenceWrites = c.Bool(flagFenceWrites)
	cfg.PruneBatchSize = c.Int(flagPruneBatchSize)
	if cfg.PruneBatchSize < 1 {
		return usagef("--%s: must be at least 1, got %d", flagPruneBatchSize, cfg.PruneBatchSize)
	}
	cfg.StatusInterval = c.Duration(flagStatusInterval)
	cfg.PruneInterval = c.Duration(flagPruneInterval)
	cfg.PruneAfter = c.Duration(flagPruneAfter)
	cfg.ShutdownTimeout = c.Duration(flagShutdownTimeout)
	cfg.LagPollInterval = c.Duration(flagLagPoll)
	cfg.StandbyRetryInterval = c.Duration(flagStandbyRetry)
	cfg.HeartbeatInterval = c.Duration(flagHeartbeat)
	if err := exactlyOnceConfig(c, cfg); err != nil {
		return err
	}
	cfg.Kafka.TransactionTimeout = c.Duration(flagTxnTimeout)
	for flag, d := range map[string]time.Duration{
		flagTxnTimeout:      cfg.Kafka.TransactionTimeout,
		flagStatusInterval:  cfg.StatusInterval,
		flagPruneInterval:   cfg.PruneInterval,
		flagShutdownTimeout: cfg.ShutdownTimeout,
		flagLagPoll:         cfg.LagPollInterval,
		flagStandbyRetry:    cfg.StandbyRetryInterval,
	} {
		if d <= 0 {
			return usagef("--%s: must be positive", flag)
		}
	}
	if cfg.PruneAfter < 0 {
		return usagef("--%s: must not be negative (0 disables pruning)", flagPruneAfter)
	}
	if cfg.HeartbeatInterval < 0 {
		return usagef("--%s: must not be negative (0 disables the heartbeat)", flagHeartbeat)
	}
	if addr := c.String(flagMetricsAddr); addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return usagef("--%s: %q is not host:port (use :9740 for every interface, empty to disable)", flagMetricsAddr, addr)
		}
	}
	return nil
}

// exactlyOnceConfig validates the exactlyOnceFlags into cfg.
func exactlyOnceConfig(c *cli.Context, cfg *relay.Config) error {
	cfg.ExactlyOnce = c.Bool(flagExactlyOnce)
	cfg.Kafka.ProgressTopic = c.String(flagProgressTopic)
	if strings.TrimSpace(cfg.Kafka.ProgressTopic) == "" {
		return usagef("--%s must not be empty", flagProgressTopic)
	}
	return nil
}

// kafkaSecurity reads the Kafka TLS and SASL flags into cfg, teaching sc
// the SASL password first.
func kafkaSecurity(c *cli.Context, sc *scrubber, cfg *relay.Config) error {
	sec, err := kafkaflags.Read(c, envName)
	sc.add(sec.Password)
	if err != nil {
		return err
	}
	if sec.PasswordOnCommandLine {
		sc.exposed = append(sc.exposed, kafkaflags.FlagSASLPassword)
	}
	cfg.Kafka.TLS, cfg.Kafka.SASL = sec.TLS, sec.SASL
	return nil
}

// topicTemplate reads --topic-template into cfg: when it is empty, the
// default of cfg.TableFormat.
func topicTemplate(c *cli.Context, cfg *relay.Config) error {
	cfg.TopicTemplate = strings.TrimSpace(c.String(flagTopicTemplate))
	if cfg.TopicTemplate == "" {
		cfg.TopicTemplate = relay.TopicTemplateOf(cfg.TableFormat)
	}
	return nil
}

// kafkaConfig validates the brokers, topics, invalid-row policy and
// compression flags into cfg.
// allowedTopics reads --allowed-topics: comma-separated prefixes, in one
// flag or several.
func allowedTopics(c *cli.Context) []string {
	var prefixes []string
	for _, p := range c.StringSlice(flagAllowedTopics) {
		for _, p := range strings.Split(p, ",") {
			if p = strings.TrimSpace(p); p != "" {
				prefixes = append(prefixes, p)
			}
		}
	}
	return prefixes
}

func kafkaConfig(c *cli.Context, cfg *relay.Config) error {
	var err error
	if cfg.Kafka.Brokers, err = brokers(c.StringSlice(flagBrokers)); err != nil && (isKafkaSink(c) || len(c.StringSlice(flagBrokers)) > 0) {
		return err
	}
	if err := topicTemplate(c, cfg); err != nil {
		return err
	}
	cfg.CloudEvents = c.Bool(flagCloudEvents)
	cfg.CloudEventsSource = c.String(flagCESource)
	if cfg.CloudEventsSource != "" && !cfg.CloudEvents {
		return usagef("--%s needs --%s", flagCESource, flagCloudEvents)
	}
	cfg.DeadLetterTopic = c.String(flagDLQTopic)
	if strings.TrimSpace(cfg.DeadLetterTopic) == "" {
		return usagef("--%s must not be empty", flagDLQTopic)
	}
	cfg.AllowedTopics = allowedTopics(c)
	cfg.Kafka.NoAutoCreateTopics = c.Bool(flagNoAutoCreate)
	switch p := relay.UnavailablePolicy(c.String(flagOnUnavailable)); p {
	case relay.UnavailableDeadLetter, relay.UnavailableStop:
		cfg.OnUnavailableTopic = p
	default:
		return usagef("--%s: %q is not one of %s, %s", flagOnUnavailable, p, relay.UnavailableDeadLetter, relay.UnavailableStop)
	}
	switch p := relay.InvalidPolicy(c.String(flagOnInvalid)); p {
	case relay.InvalidDeadLetter, relay.InvalidStop:
		cfg.OnInvalid = p
	default:
		return usagef("--%s: %q is not one of %s, %s", flagOnInvalid, p, relay.InvalidDeadLetter, relay.InvalidStop)
	}
	cfg.Kafka.Compression = c.String(flagCompression)
	if !slices.Contains(relay.Compressions, cfg.Kafka.Compression) {
		return usagef("--%s: %q is not one of %s", flagCompression, cfg.Kafka.Compression, strings.Join(relay.Compressions, ", "))
	}
	return nil
}

// limitsConfig validates the size, batching and Kafka timeout flags into
// cfg.
func limitsConfig(c *cli.Context, cfg *relay.Config) error {
	cfg.MaxMessageBytes = int(cliutil.SizeFlagValue(c, flagMaxMessageBytes))
	cfg.BufferBytes = int(cliutil.SizeFlagValue(c, flagBufferBytes))
	cfg.BatchSize = c.Int(flagBatchSize)
	for _, f := range []struct {
		flag string
		v    int
	}{
		{flagMaxMessageBytes, cfg.MaxMessageBytes},
		{flagBatchSize, cfg.BatchSize},
		{flagBufferBytes, cfg.BufferBytes},
	} {
		if f.v < 1 {
			return usagef("--%s: must be at least 1, got %d", f.flag, f.v)
		}
	}
	cfg.BatchTimeout = c.Duration(flagBatchTimeout)
	cfg.Kafka.WriteTimeout = c.Duration(flagWriteTimeout)
	if cfg.BatchTimeout < 0 {
		return usagef("--%s: must not be negative", flagBatchTimeout)
	}
	cfg.TopicUnavailableGrace = c.Duration(flagTopicGrace)
	cfg.InstanceID = c.String(flagInstanceID)
	for flag, d := range map[string]time.Duration{
		flagWriteTimeout: cfg.Kafka.WriteTimeout,
		flagTopicGrace:   cfg.TopicUnavailableGrace,
	} {
		if d <= 0 {
			return usagef("--%s: must be positive", flag)
		}
	}
	return nil
}

// brokers splits and checks the broker list ("a:9092,b:9092" in one value or
// several --brokers).
func brokers(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, b := range strings.Split(v, ",") {
			b = strings.TrimSpace(b)
			if b == "" {
				continue
			}
			if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
				return nil, usagef("--%s: %q is not host:port", flagBrokers, b)
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, usagef("--%s (or %s) is required", flagBrokers, envVar(flagBrokers)[0])
	}
	return out, nil
}

// logAttrs describes cfg for the start-up log line, without secrets.
func logAttrs(cfg *relay.Config) []any {
	return []any{
		slog.String("database", redact.URL(cfg.DatabaseURL)),
		slog.String("brokers", strings.Join(cfg.Kafka.Brokers, ",")),
		slog.String("table", cfg.Table),
		slog.String("slot", cfg.Slot),
		slog.String("publication", cfg.Publication),
		slog.String("table_format", string(cfg.TableFormat)),
		slog.String("topic_template", cfg.TopicTemplate),
		slog.Bool("cloudevents", cfg.CloudEvents),
		slog.String("allowed_topics", strings.Join(cfg.AllowedTopics, ",")),
		slog.String("on_invalid", string(cfg.OnInvalid)),
		slog.String("on_unavailable_topic", string(cfg.OnUnavailableTopic)),
		slog.Bool("auto_create_topics", !cfg.Kafka.NoAutoCreateTopics),
		slog.Bool("tls", cfg.Kafka.TLS != nil),
		slog.Bool("sasl", cfg.Kafka.SASL != nil),
	}
}
