package inbox

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTable is the inbox table used when Config.Table is empty.
const DefaultTable = "public.inbox"

// ConflictPolicy says what happens to a conflicting message: the same message
// ID with another business key or payload, or the same business key with
// another payload. Its values are the words of inbox tail's
// --conflict-policy flag; the zero value "" means ConflictPolicyDeadLetter.
type ConflictPolicy string

const (
	// ConflictPolicyDeadLetter, the default, answers DeadLettered (reason
	// "conflict", the *ConflictError in Result.Err); the consumer loop sends
	// the record to the dead-letter topic with both sides of the conflict in
	// its headers, acknowledges it and goes on. The stored row is left as it
	// is.
	ConflictPolicyDeadLetter ConflictPolicy = "dead-letter"
	// ConflictPolicyStop answers Conflict with an error wrapping ErrConflict
	// and leaves the message unacknowledged: an operator must look at it. The
	// consumer loop stops with that error, naming the record (topic,
	// partition, offset); a restart meets the same record and stops again.
	ConflictPolicyStop ConflictPolicy = "stop"
)

// Config configures an Inbox. Consumer is required; every other field has a
// default.
type Config struct {
	// Consumer names the logical subscriber (usually the service name). Rows
	// are keyed per consumer, so services can share one table. Required.
	Consumer string
	// Table is the inbox table, "table" or "schema.table". Defaults to
	// "public.inbox".
	Table string
	// MaxAttempts is how many times a failing handler runs before the message
	// becomes FAILED_FINAL and is dead-lettered. Defaults to 5.
	MaxAttempts int
	// Backoff returns the wait before attempt+1 after attempt failed
	// (attempt counts from 1). The consumer loop uses it between retries.
	// Defaults to DefaultBackoff (exponential from 1s, capped at 1m, with
	// jitter).
	Backoff func(attempt int) time.Duration
	// LeaseDuration is how long a PROCESSING claim of the two-phase path is
	// held before a later delivery may take it over. Defaults to 30s.
	LeaseDuration time.Duration
	// ConflictPolicy decides what a conflicting message becomes. Defaults to
	// ConflictPolicyDeadLetter.
	ConflictPolicy ConflictPolicy
	// PayloadHash returns the digest that tells a duplicate (same business
	// key, same digest) from a conflict (same key, another digest). Set it
	// when producers embed volatile fields (a timestamp, a retry counter) in
	// the payload of a re-emitted event: hash only the stable fields, and
	// fall back to SHA256Payload for a payload it cannot parse. Changing it
	// makes every stored message's redelivery a conflict, so set it before
	// the first message, or expect conflicts until the redelivery window has
	// passed. Defaults to SHA256Payload.
	PayloadHash func(msg *Message) []byte
	// TxRetries bounds the transparent retries of a transaction that failed
	// with a serialization failure (40001) or a deadlock (40P01). Defaults
	// to 5.
	TxRetries int
	// Logger receives structured logs with message_id, business_key, status
	// transition, attempt and reason. Defaults to slog.Default(). Message
	// IDs and business keys (often personal data: e-mail addresses,
	// account numbers) are logged shortened to a prefix, their length and a
	// short hash, unless LogFullKeys is set; handler errors are logged as
	// ErrorRedactor renders them.
	Logger *slog.Logger
	// LogFullKeys logs message IDs and business keys whole, for debugging.
	LogFullKeys bool
	// ErrorRedactor renders a handler error for every place it is kept or
	// shown: the last_error column, the dlq-detail header and the logs. Use
	// it to scrub what an error may quote (URLs with tokens, response
	// bodies). Defaults to err.Error(). The text is then bounded to
	// MaxErrorText bytes.
	ErrorRedactor func(error) string
	// TracerProvider creates the span of each delivery of the consumer loop.
	// Defaults to otel.GetTracerProvider() (a no-op until the application
	// installs an SDK).
	TracerProvider trace.TracerProvider
	// Propagator extracts the producer's trace context from the record
	// headers (traceparent, tracestate). Defaults to
	// otel.GetTextMapPropagator(); install propagation.TraceContext{} there,
	// or set it here.
	Propagator propagation.TextMapPropagator
	// TraceLinkOnly starts each delivery span in a trace of its own, linked
	// to the message's creation context, instead of as its child:
	// OpenTelemetry's messaging conventions require the link and leave the
	// parent to the application. Defaults to false: the span is the
	// creation context's child (one trace from the producer's request to
	// the consumer's effect) and links to it too.
	TraceLinkOnly bool
	// TraceBusinessKey adds the business key to each delivery span
	// (attribute pgoutbox.inbox.business_key). Off by default: keys can
	// hold personal data.
	TraceBusinessKey bool
	// Registerer receives the metrics listed in the package documentation.
	// Defaults to none: metrics are kept but not registered.
	Registerer prometheus.Registerer
}

// DefaultBackoff waits 1s, 2s, 4s, ... up to 1m, plus up to 20% jitter.
func DefaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := time.Minute
	if attempt < 7 {
		d = time.Second << (attempt - 1)
	}
	return d + rand.N(d/5+1)
}

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("inbox: config is nil; Consumer is required")
	}
	cfg := *c
	if cfg.Consumer == "" {
		return Config{}, errors.New("inbox: Config.Consumer is required")
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.MaxAttempts < 0 {
		return Config{}, fmt.Errorf("inbox: Config.MaxAttempts %d is negative", cfg.MaxAttempts)
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 30 * time.Second
	}
	if cfg.LeaseDuration < 0 {
		return Config{}, fmt.Errorf("inbox: Config.LeaseDuration %v is negative", cfg.LeaseDuration)
	}
	if cfg.ConflictPolicy == "" {
		cfg.ConflictPolicy = ConflictPolicyDeadLetter
	}
	if cfg.ConflictPolicy != ConflictPolicyStop && cfg.ConflictPolicy != ConflictPolicyDeadLetter {
		return Config{}, fmt.Errorf("inbox: Config.ConflictPolicy %q: want %q or %q", cfg.ConflictPolicy, ConflictPolicyDeadLetter, ConflictPolicyStop)
	}
	if cfg.PayloadHash == nil {
		cfg.PayloadHash = SHA256Payload
	}
	if cfg.TxRetries == 0 {
		cfg.TxRetries = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tracingDefaults(&cfg)
	return cfg, nil
}
