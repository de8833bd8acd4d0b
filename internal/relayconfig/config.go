package relayconfig

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/pgtls"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/tableformat"
)

// InvalidPolicy says what the relay does with a row it cannot publish
// (value over the size limit, NULL in a required column, unsupported type).
type InvalidPolicy string

const (
	// InvalidDeadLetter publishes the row to the dead-letter topic with the
	// reason in headers, counts and logs it, and goes on. The default.
	InvalidDeadLetter InvalidPolicy = "dead-letter"
	// InvalidStop stops the relay with an error naming the row; its WAL
	// position is not acknowledged, so it is read again after a restart.
	InvalidStop InvalidPolicy = "stop"
)

// UnavailablePolicy says what the relay does with a record whose topic
// stays unavailable (it does not exist, or the relay may not write it)
// for longer than Config.TopicUnavailableGrace.
type UnavailablePolicy string

const (
	// UnavailableDeadLetter dead-letters the record with reason
	// topic-unavailable and goes on; later records of the topic are
	// dead-lettered at their first failed write while it stays
	// unavailable. The default: a producer naming a topic that does not
	// exist cannot stop the relay.
	UnavailableDeadLetter UnavailablePolicy = "dead-letter"
	// UnavailableStop ends Run with ErrTopicUnavailable, the record not
	// confirmed (so a restart after the fix publishes it).
	UnavailableStop UnavailablePolicy = "stop"
)

// GapPolicy says what Run does when it finds a gap (see GapError).
type GapPolicy string

const (
	// GapStop ends Run with the *GapError, streaming nothing. The default.
	GapStop GapPolicy = "stop"
	// GapBackfill recovers the gap as Recover does, then streams.
	GapBackfill GapPolicy = "backfill"
)

// Config is relay.Config, field for field: package relay declares it
// with every field's documentation and its default, and converts it with
// (*relayconfig.Config)(cfg), which compiles only while both declare the
// same fields, in the same order, of the same types. Change both together.
type Config struct {
	DatabaseURL string
	RequireTLS  bool
	Brokers     []string

	Table       string
	Slot        string
	Publication string
	TableFormat tableformat.TableFormat
	NoCreate    bool

	TopicTemplate   string
	DeadLetterTopic string
	AllowedTopics   []string
	OnInvalid       InvalidPolicy
	MaxMessageBytes int

	BatchSize             int
	BufferBytes           int
	BatchTimeout          time.Duration
	Compression           string
	TLS                   *tls.Config
	SASL                  *SASL
	WriteTimeout          time.Duration
	RetryBackoff          time.Duration
	MaxRetryBackoff       time.Duration
	TopicUnavailableGrace time.Duration
	OnUnavailableTopic    UnavailablePolicy
	NoAutoCreateTopics    bool

	ExactlyOnce        bool
	ProgressTopic      string
	TransactionTimeout time.Duration

	StatusInterval  time.Duration
	ShutdownTimeout time.Duration

	LagPollInterval      time.Duration
	StandbyRetryInterval time.Duration
	HeartbeatInterval    time.Duration

	OnGap          GapPolicy
	BackfillMargin time.Duration

	PruneAfter     time.Duration
	PruneInterval  time.Duration
	PruneBatchSize int

	CloudEvents       bool
	CloudEventsSource string

	InstanceID string

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// InstanceHeader is the record header that carries Config.InstanceID.
const InstanceHeader = contract.HeaderRelayInstance

// Defaults of the Config fields.
const (
	DefaultTable                         = "public.outbox"
	DefaultSlot                          = "pgoutbox"
	DefaultPublication                   = "pgoutbox"
	DefaultDeadLetterTopic               = "outbox.dlq"
	DefaultMaxMessageBytes               = 1000000
	DefaultBatchSize                     = 5000
	DefaultBufferBytes                   = 32 << 20
	DefaultBatchTimeout    time.Duration = 0
	DefaultWriteTimeout                  = 10 * time.Second
	DefaultRetryBackoff                  = 100 * time.Millisecond
	DefaultMaxRetryBackoff               = 10 * time.Second

	DefaultTopicUnavailableGrace = 5 * time.Minute
	DefaultTransactionTimeout    = 40 * time.Second
	DefaultStatusInterval        = 3 * time.Second
	DefaultShutdownTimeout       = 10 * time.Second
	DefaultPruneInterval         = time.Minute
	DefaultPruneBatchSize        = 1000
	DefaultBackfillMargin        = 5 * time.Minute

	DefaultLagPollInterval      = 10 * time.Second
	DefaultStandbyRetryInterval = time.Second
	// DefaultProgressTopic is the default Config.ProgressTopic.
	DefaultProgressTopic = contract.DefaultProgressTopic
)

// slotNamePattern is what Postgres accepts as a replication slot name.
var slotNamePattern = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// WithDefaults returns a copy of cfg with every zero field set to its
// default, and validates it.
func WithDefaults(cfg *Config) (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	setDefault(&c.Table, DefaultTable)
	setDefault(&c.Slot, DefaultSlot)
	setDefault(&c.Publication, DefaultPublication)
	setDefault(&c.TableFormat, tableformat.TableFormatPgoutbox)
	setDefault(&c.TopicTemplate, tableformat.Shape(c.TableFormat).TopicTemplate)
	if c.CloudEvents && c.CloudEventsSource == "" {
		c.CloudEventsSource = tableformat.DefaultCloudEventsSource(c.DatabaseURL, c.Table)
	}
	setDefault(&c.DeadLetterTopic, DefaultDeadLetterTopic)
	setDefault(&c.OnInvalid, InvalidDeadLetter)
	setDefault(&c.Compression, "none")
	setDefault(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.BufferBytes, DefaultBufferBytes)
	setDefault(&c.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.RetryBackoff, DefaultRetryBackoff)
	setDefault(&c.MaxRetryBackoff, DefaultMaxRetryBackoff)
	setDefault(&c.TopicUnavailableGrace, DefaultTopicUnavailableGrace)
	setDefault(&c.OnUnavailableTopic, UnavailableDeadLetter)
	setDefault(&c.StatusInterval, DefaultStatusInterval)
	setDefault(&c.ProgressTopic, DefaultProgressTopic)
	setDefault(&c.TransactionTimeout, DefaultTransactionTimeout)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.PruneInterval, DefaultPruneInterval)
	setDefault(&c.PruneBatchSize, DefaultPruneBatchSize)
	setDefault(&c.OnGap, GapStop)
	setDefault(&c.BackfillMargin, DefaultBackfillMargin)
	setDefault(&c.LagPollInterval, DefaultLagPollInterval)
	setDefault(&c.StandbyRetryInterval, DefaultStandbyRetryInterval)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		c.MaxRetryBackoff = c.RetryBackoff
	}

	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
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
		bad("table format %q: want %q or %q", c.TableFormat, tableformat.TableFormatPgoutbox, tableformat.TableFormatDebezium)
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
	if err := ParseTopicTemplate(c.TopicTemplate).check(); err != nil {
		bad("topic template %q: %v", c.TopicTemplate, err)
	}
	if c.OnInvalid != InvalidDeadLetter && c.OnInvalid != InvalidStop {
		bad("on-invalid %q: want %q or %q", c.OnInvalid, InvalidDeadLetter, InvalidStop)
	}
	if c.OnUnavailableTopic != UnavailableDeadLetter && c.OnUnavailableTopic != UnavailableStop {
		bad("on-unavailable-topic %q: want %q or %q", c.OnUnavailableTopic, UnavailableDeadLetter, UnavailableStop)
	}
	if c.OnGap != GapStop && c.OnGap != GapBackfill {
		bad("on-gap %q: want %q or %q", c.OnGap, GapStop, GapBackfill)
	}
	if _, err := producer.Codec(c.Compression); err != nil {
		bad("%v", err)
	}
	if c.ExactlyOnce {
		if err := contract.CheckTopic([]byte(c.ProgressTopic)); err != nil {
			bad("progress topic: %v", err)
		} else if c.ProgressTopic == c.DeadLetterTopic {
			bad("progress topic %s is the dead-letter topic: give each its own", c.ProgressTopic)
		}
	}
	if c.SASL != nil {
		if err := checkSASL(c.SASL); err != nil {
			bad("%v", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"batch timeout", c.BatchTimeout}, {"write timeout", c.WriteTimeout}, {"retry backoff", c.RetryBackoff},
		{"status interval", c.StatusInterval}, {"shutdown timeout", c.ShutdownTimeout}, {"prune interval", c.PruneInterval},
		{"prune after", c.PruneAfter}, {"lag poll interval", c.LagPollInterval},
		{"standby retry interval", c.StandbyRetryInterval}, {"heartbeat interval", c.HeartbeatInterval},
		{"topic unavailable grace", c.TopicUnavailableGrace}, {"backfill margin", c.BackfillMargin},
		{"transaction timeout", c.TransactionTimeout}} {
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
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", relayerr.ErrConfig, errors.Join(errs...))
	}
	return c, nil
}

// NeedBrokers is the extra check of the configurations that talk to Kafka.
func NeedBrokers(c *Config) error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("%w: brokers are required", relayerr.ErrConfig)
	}
	return nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// SASL mechanisms, as Kafka names them.
const (
	SASLPlain       = producer.MechanismPlain
	SASLSCRAMSHA256 = producer.MechanismSCRAMSHA256
	SASLSCRAMSHA512 = producer.MechanismSCRAMSHA512
	// SASLOAuthBearer authenticates with a token read from
	// SASL.TokenFile at every authentication, so a token another process
	// refreshes in the file is picked up.
	SASLOAuthBearer = producer.MechanismOAuthBearer
	// SASLAWSMSKIAM authenticates to Amazon MSK with IAM: Username is the
	// access key ID, Password the secret access key, SessionToken the
	// session token; with Username empty, AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN are read at every
	// authentication.
	SASLAWSMSKIAM = producer.MechanismAWSMSKIAM
)

// SASL is relay.SASL: an alias of the same struct type, so that Config
// stays convertible to relay.Config (a named type would differ from
// package relay's). The fields' documentation is there.
type SASL = struct {
	Mechanism    string
	Username     string
	Password     string
	TokenFile    string
	SessionToken string
}

// checkSASL validates s.
func checkSASL(s *SASL) error {
	switch strings.ToUpper(s.Mechanism) {
	case SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512:
		if s.Username == "" {
			return fmt.Errorf("SASL %s needs a username", s.Mechanism)
		}
	case SASLOAuthBearer:
		if s.TokenFile == "" {
			return errors.New("SASL OAUTHBEARER needs a token file")
		}
	case SASLAWSMSKIAM:
	default:
		return fmt.Errorf("SASL mechanism %q: want one of %s", s.Mechanism, strings.Join(producer.Mechanisms, ", "))
	}
	return nil
}
