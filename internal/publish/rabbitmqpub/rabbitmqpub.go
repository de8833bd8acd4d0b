package rabbitmqpub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"

	_ "github.com/pgoutbox/pgoutbox/internal/streamlog" // the stream client logs through log/slog
)

// Name is the publisher's name in the registry (relay run --sink rabbitmq).
const Name = "rabbitmq"

func init() { publish.Register(Name, New) }

// Config is the RabbitMQ publisher's settings (publish.Config.Settings).
type Config struct {
	// URI is the stream protocol's address
	// ("rabbitmq-stream://user:password@host:5552/vhost"). Required. It is
	// never logged.
	URI string
	// TLS enables TLS when non-nil (its RootCAs verify the server, its
	// Certificates are the client's for a server that requires one; an
	// empty ServerName is the URI's host). Defaults to plaintext, or TLS
	// with the system's roots for a rabbitmq-stream+tls:// URI.
	TLS *tls.Config
	// Incarnation is the identity of the slot's WAL history (the state
	// row's incarnation): with it, the producer is named and the stream
	// drops replayed records. Defaults to none: the producer is named
	// from the session's slot identity (publish.Session.Slot, which the
	// relay gives), and without either there is no deduplication.
	Incarnation string
	// ConfirmTimeout bounds the wait for a publish confirmation. Defaults
	// to 30s.
	ConfirmTimeout time.Duration
}

// Publisher writes records to RabbitMQ streams.
type Publisher struct {
	cfg  Config
	slot string
	log  *slog.Logger

	env   *stream.Environment
	guard func() error
	// name is the session's producer name, empty when it deduplicates
	// nothing (no incarnation known).
	name      string
	producers map[producerKey]*producer
	// unnamedSeq numbers the messages of the producers without a name.
	unnamedSeq int64
}

// producerKey picks a stream's producer: named (deduplicating) or not.
type producerKey struct {
	stream string
	named  bool
}

// New makes a RabbitMQ publisher from c (c.Settings a Config); it
// connects to nothing (Open does).
func New(c publish.Config) (publish.Publisher, error) {
	cfg, ok := c.Settings.(Config)
	if !ok {
		return nil, fmt.Errorf("%w: rabbitmq sink: settings %T, want rabbitmqpub.Config", relaytype.ErrConfig, c.Settings)
	}
	if cfg.URI == "" {
		return nil, fmt.Errorf("%w: rabbitmq sink: a stream URI is required", relaytype.ErrConfig)
	}
	p := &Publisher{cfg: cfg, slot: c.Slot, log: c.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.cfg.ConfirmTimeout <= 0 {
		p.cfg.ConfirmTimeout = 30 * time.Second
	}
	return p, nil
}

// ProducerName is the producer name of a slot's incarnation.
func ProducerName(slot, incarnation string) string {
	return "pgoutbox." + slot + "." + incarnation
}

// Open connects. The publisher has no exactly-once mode and cannot fence:
// a session with an Identity or a Fence is refused.
func (p *Publisher) Open(ctx context.Context, s publish.Session) error {
	p.Close()
	if s.Identity != "" {
		return relayerr.Permanent(errors.New("rabbitmq sink: exactly-once mode is not supported; streams deduplicate on the producer's publishing ID instead"))
	}
	if s.Fence != "" {
		return relayerr.Permanent(errors.New("rabbitmq sink: fenced writes (--fence-writes) are not supported"))
	}
	env, err := p.connect()
	if err != nil {
		return err
	}
	p.env, p.guard, p.producers = env, s.Guard, map[producerKey]*producer{}
	p.name = p.producerName(s)
	return nil
}

// connect opens a stream client environment to the configured node: an
// error that no retry fixes (refused credentials, an unknown virtual host)
// wraps relayerr.Permanent.
func (p *Publisher) connect() (*stream.Environment, error) {
	opts := stream.NewEnvironmentOptions().SetUri(p.cfg.URI).SetMaxProducersPerClient(50)
	if conf, err := p.tlsConfig(); err != nil {
		return nil, err
	} else if conf != nil {
		opts = opts.IsTLS(true).SetTLSConfig(conf)
	}
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		if errors.Is(err, stream.AuthenticationFailure) || errors.Is(err, stream.AuthenticationFailureLoopbackError) ||
			errors.Is(err, stream.VirtualHostAccessFailure) {
			return nil, relayerr.Permanent(fmt.Errorf("rabbitmq sink: %w", err))
		}
		return nil, fmt.Errorf("rabbitmq sink: connect: %w", err)
	}
	return env, nil
}

// Close ends the session: records still awaiting a confirmation fail.
func (p *Publisher) Close() {
	for _, pr := range p.producers {
		pr.close()
	}
	if p.env != nil {
		_ = p.env.Close()
	}
	p.env, p.guard, p.producers, p.name = nil, nil, nil, ""
}

// tlsConfig is the TLS configuration of the connections: Config.TLS, or
// TLS with the system's roots for a rabbitmq-stream+tls:// URI; nil for
// plaintext. Its ServerName defaults to the URI's host (the stream client
// dials without one, which a handshake that verifies the server refuses).
func (p *Publisher) tlsConfig() (*tls.Config, error) {
	u, err := url.Parse(p.cfg.URI)
	if err != nil {
		// Never echo the URI: it holds the password.
		return nil, relayerr.Permanent(fmt.Errorf("%w: rabbitmq sink: the stream URI does not parse", relaytype.ErrConfig))
	}
	if p.cfg.TLS == nil && u.Scheme != "rabbitmq-stream+tls" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.cfg.TLS != nil {
		conf = p.cfg.TLS.Clone()
	}
	if conf.ServerName == "" {
		conf.ServerName = u.Hostname()
	}
	return conf, nil
}

// producerName is the name of s's deduplicating producer: of the
// configured incarnation, else the session's slot identity; empty when
// neither is known.
func (p *Publisher) producerName(s publish.Session) string {
	switch {
	case p.cfg.Incarnation != "":
		return ProducerName(p.slot, p.cfg.Incarnation)
	case s.Slot != "":
		return s.Slot
	}
	return ""
}

// producer returns the producer of key, declaring it on first use.
func (p *Publisher) producer(key producerKey) (*producer, error) {
	if pr, ok := p.producers[key]; ok && !pr.isClosed() {
		return pr, nil
	}
	opts := stream.NewProducerOptions().SetClientProvidedName("pgoutbox-relay").
		SetConfirmationTimeOut(p.cfg.ConfirmTimeout)
	if key.named {
		opts = opts.SetProducerName(p.name)
	}
	sp, err := declare(p.env, key.stream, opts, p.cfg.ConfirmTimeout)
	if err != nil {
		return nil, err
	}
	pr := newProducer(sp)
	p.producers[key] = pr
	return pr, nil
}

// errDeclareTimeout ends a Write whose producer the stream client could
// not declare in time: with the broker away the client retries its
// locator connection without end, so only a new session (a new
// environment, connected again with the relay's backoff) gets on.
var errDeclareTimeout = errors.New("rabbitmq sink: declaring a producer took too long; the broker is presumed away")

// declare declares a producer of stream on env, giving up after timeout
// (errDeclareTimeout; the declaration goes on, and a producer it still
// makes is closed).
func declare(env *stream.Environment, name string, opts *stream.ProducerOptions, timeout time.Duration) (*stream.Producer, error) {
	type result struct {
		sp  *stream.Producer
		err error
	}
	done := make(chan result, 1)
	abandoned := make(chan struct{})
	go func() {
		sp, err := env.NewProducer(name, opts)
		select {
		case done <- result{sp, err}:
		case <-abandoned:
			if err == nil {
				_ = sp.Close()
			}
		}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.sp, r.err
	case <-timer.C:
		close(abandoned)
		// The goroutine may have sent just before: close what it made.
		select {
		case r := <-done:
			if r.err == nil {
				_ = r.sp.Close()
			}
		default:
		}
		return nil, fmt.Errorf("%w (%v)", errDeclareTimeout, timeout)
	}
}

// PublishingID is the publishing ID of the record at pos, false when pos
// is none (a backfill's record) or out of the ID's range: the commit
// LSN's lower 47 bits, then 16 bits of the record's index in its
// transaction.
func PublishingID(pos publish.Position) (int64, bool) {
	if pos.Final == 0 || pos.Final >= 1<<47 || pos.Seq < 0 || pos.Seq >= 1<<16 {
		return 0, false
	}
	return int64(pos.Final)<<16 | int64(pos.Seq), true
}

// message is rec as an AMQP 1.0 message with the publishing ID id.
func message(rec *publish.Record, id int64) *amqp.AMQP10 {
	m := amqp.NewMessage(rec.Value)
	m.SetPublishingId(id)
	m.Properties = &amqp.MessageProperties{CreationTime: rec.Timestamp}
	if len(rec.Headers) > 0 {
		m.ApplicationProperties = make(map[string]any, len(rec.Headers))
		for _, h := range rec.Headers {
			m.ApplicationProperties[h.Key] = string(h.Value)
		}
	}
	return m
}

// Write sends recs in order and waits for every confirmation (see
// publish.Publisher.Write).
func (p *Publisher) Write(ctx context.Context, recs []*publish.Record, out []publish.Outcome) error {
	if p.env == nil {
		return errors.New("rabbitmq sink: no session open")
	}
	for i := range out {
		out[i] = publish.Outcome{}
	}
	used := map[*producer]bool{}
	mode := map[string]bool{} // the producer kind each stream last took
	// The client fails a record it has not confirmed within
	// ConfirmTimeout; past that and a grace, it will not say.
	deadline := time.Now().Add(p.cfg.ConfirmTimeout + confirmGrace)
	for i, rec := range recs {
		if p.guard != nil {
			if err := p.guard(); err != nil {
				return err
			}
		}
		id, named := PublishingID(rec.Pos)
		named = named && p.name != ""
		if last, seen := mode[rec.Topic]; seen && last != named {
			// A switch of producer: what the other one sent first must be
			// stored first.
			if err := waitAll(ctx, used, deadline); err != nil {
				return err
			}
		}
		mode[rec.Topic] = named
		pr, err := p.producer(producerKey{stream: rec.Topic, named: named})
		if errors.Is(err, errDeclareTimeout) {
			return err
		}
		if err != nil {
			out[i] = classify(err)
			continue
		}
		if !named {
			p.unnamedSeq++
			id = p.unnamedSeq
		}
		used[pr] = true
		pr.expect(id, &out[i])
		if err := pr.sp.Send(message(rec, id)); err != nil {
			pr.forget(id)
			out[i] = classify(err)
		}
	}
	if err := waitAll(ctx, used, deadline); err != nil {
		return err
	}
	failLater(recs, out)
	return nil
}

// failLater makes every record after a failed one of the same stream fail
// too (Retry), so the retry writes them again in order: the stream drops
// the copies it holds, and never holds a later record without an earlier
// one that a retry could not add any more (its ID below the stream's
// last). Refused records are not retried, so they do not count.
func failLater(recs []*publish.Record, out []publish.Outcome) {
	failed := map[string]error{}
	for i, rec := range recs {
		if err, ok := failed[rec.Topic]; ok && out[i].Verdict == publish.Confirmed {
			out[i] = publish.Outcome{Verdict: publish.Retry, Err: fmt.Errorf("rabbitmq sink: an earlier record of stream %s failed: %w", rec.Topic, err)}
			continue
		}
		if v := out[i].Verdict; v == publish.Retry || v == publish.TopicUnavailable {
			if _, ok := failed[rec.Topic]; !ok {
				failed[rec.Topic] = out[i].Err
			}
		}
	}
}

// confirmGrace is how long past the client's confirmation timeout a
// Write waits for its outcomes before it gives the session up.
const confirmGrace = 10 * time.Second

// waitAll waits until the producers used have every confirmation they
// expect, ctx ends, or deadline passes (errNoConfirmation).
func waitAll(ctx context.Context, used map[*producer]bool, deadline time.Time) error {
	for pr := range used {
		if err := pr.wait(ctx, deadline); err != nil {
			return err
		}
	}
	return nil
}

// classify is the one table from a stream error to the sink's verdict.
// The outcome's error is err without the call stack the client's errors
// (github.com/pkg/errors) print under %+v, which log/slog's text handler
// uses: a confirmation timeout logged 20 lines of the client's init.
func classify(err error) publish.Outcome {
	o := publish.Outcome{Verdict: publish.Retry, Err: plainError{err}}
	switch {
	case errors.Is(err, stream.FrameTooLarge):
		o.Verdict, o.Reason = publish.Refused, publish.ReasonTooLarge
	case errors.Is(err, stream.StreamDoesNotExist):
		o.Verdict, o.Reason = publish.TopicUnavailable, publish.ReasonUnknownTopic
	case errors.Is(err, stream.CodeAccessRefused):
		o.Verdict, o.Reason = publish.TopicUnavailable, publish.ReasonNotAuthorized
	}
	return o
}

// plainError is an error printed by its message alone, whatever the verb:
// it wraps err (errors.Is and As see it) without its fmt.Formatter.
type plainError struct{ err error }

// Error is err's message.
func (e plainError) Error() string { return e.err.Error() }

// Unwrap is err.
func (e plainError) Unwrap() error { return e.err }
