package relay

import "github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"

// The configuration is declared once, in package relaytype, which the
// engine's packages import too; the names below are aliases of it (the same
// types and values), and go doc relaytype shows their fields and
// documentation.

// Config configures a Relay. DatabaseURL and Brokers are required; every
// other field has a default (go doc relaytype.Config lists the fields).
// Config.WithDefaults returns it with its defaults, validated.
type Config = relaytype.Config

// SASL is the SASL mechanism and credentials the relay authenticates to
// the brokers with (go doc relaytype.SASL); build it as any struct
// (&relay.SASL{...}).
type SASL = relaytype.SASL

// SASL mechanisms, as Kafka names them (see relaytype.SASLPlain...).
const (
	SASLPlain       = relaytype.SASLPlain
	SASLSCRAMSHA256 = relaytype.SASLSCRAMSHA256
	SASLSCRAMSHA512 = relaytype.SASLSCRAMSHA512
	SASLOAuthBearer = relaytype.SASLOAuthBearer
	SASLAWSMSKIAM   = relaytype.SASLAWSMSKIAM
)

// Defaults of the Config fields (relaytype.DefaultTable...).
const (
	DefaultTable                 = relaytype.DefaultTable
	DefaultSlot                  = relaytype.DefaultSlot
	DefaultPublication           = relaytype.DefaultPublication
	DefaultDeadLetterTopic       = relaytype.DefaultDeadLetterTopic
	DefaultMaxMessageBytes       = relaytype.DefaultMaxMessageBytes
	DefaultBatchSize             = relaytype.DefaultBatchSize
	DefaultBufferBytes           = relaytype.DefaultBufferBytes
	DefaultBatchTimeout          = relaytype.DefaultBatchTimeout
	DefaultWriteTimeout          = relaytype.DefaultWriteTimeout
	DefaultRetryBackoff          = relaytype.DefaultRetryBackoff
	DefaultMaxRetryBackoff       = relaytype.DefaultMaxRetryBackoff
	DefaultTopicUnavailableGrace = relaytype.DefaultTopicUnavailableGrace
	DefaultTransactionTimeout    = relaytype.DefaultTransactionTimeout
	DefaultStatusInterval        = relaytype.DefaultStatusInterval
	DefaultShutdownTimeout       = relaytype.DefaultShutdownTimeout
	DefaultPruneInterval         = relaytype.DefaultPruneInterval
	DefaultPruneBatchSize        = relaytype.DefaultPruneBatchSize
	DefaultBackfillMargin        = relaytype.DefaultBackfillMargin
	DefaultLagPollInterval       = relaytype.DefaultLagPollInterval
	DefaultStandbyRetryInterval  = relaytype.DefaultStandbyRetryInterval
	DefaultProgressTopic         = relaytype.DefaultProgressTopic
)

// InstanceHeader is the record header that carries Config.InstanceID.
const InstanceHeader = relaytype.InstanceHeader

// InvalidPolicy says what the relay does with a row it cannot publish
// (relaytype.InvalidPolicy).
type InvalidPolicy = relaytype.InvalidPolicy

// The InvalidPolicy values: dead-letter the row (the default), or stop.
const (
	InvalidDeadLetter = relaytype.InvalidDeadLetter
	InvalidStop       = relaytype.InvalidStop
)

// UnavailablePolicy says what the relay does with a record whose topic
// stays unavailable past Config.TopicUnavailableGrace
// (relaytype.UnavailablePolicy).
type UnavailablePolicy = relaytype.UnavailablePolicy

// The UnavailablePolicy values: dead-letter the record (the default), or
// stop with ErrTopicUnavailable.
const (
	UnavailableDeadLetter = relaytype.UnavailableDeadLetter
	UnavailableStop       = relaytype.UnavailableStop
)

// GapPolicy says what Run does when it finds a gap (relaytype.GapPolicy).
type GapPolicy = relaytype.GapPolicy

// The GapPolicy values: stop with the *GapError (the default), or recover
// the gap as Recover does, then stream.
const (
	GapStop     = relaytype.GapStop
	GapBackfill = relaytype.GapBackfill
)
