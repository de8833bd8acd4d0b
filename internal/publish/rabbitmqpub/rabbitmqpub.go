package rabbitmqpub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/streamconn"
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

	// open says a session is open (Open ran, Close did not), with its
	// guard and its producer name (empty when it deduplicates nothing:
	// no incarnation known).
	open  bool
	guard func() error
	name  string
	// conn is the session's connection; nil once one was given up (see
	// Write), until the next Write connects again.
	conn *conn
	// spare is the outcomes of the last Write that ended cleanly, for the
	// next one (an outcome of a Write given up may still be set by the
	// client's confirmations).
	spare []publish.Outcome
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
	p.guard, p.name = s.Guard, p.producerName(s)
	c, err := p.connect()
	if err != nil {
		p.guard, p.name = nil, ""
		return err
	}
	p.conn, p.open = c, true
	return nil
}

// connect opens a connection of the session (environment).
func (p *Publisher) connect() (*conn, error) {
	env, err := p.environment()
	if err != nil {
		return nil, err
	}
	return &conn{env: env, guard: p.guard, name: p.name, confirmTimeout: p.cfg.ConfirmTimeout, producers: map[producerKey]*producer{}}, nil
}

// environment opens a stream client environment to the configured node:
// an error that no retry fixes (refused credentials, an unknown virtual
// host) wraps relayerr.Permanent.
func (p *Publisher) environment() (*stream.Environment, error) {
	opts := streamconn.Options(p.cfg.URI).SetMaxProducersPerClient(50)
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
	p.dropConn()
	p.open, p.guard, p.name = false, nil, ""
}

// dropConn closes the session's connection, waiting for that at most
// closeWait (the client's calls may not return: see Write); the next
// Write connects again.
func (p *Publisher) dropConn() {
	if p.conn != nil {
		p.conn.close(closeWait)
		p.conn = nil
	}
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

// errDeclareTimeout ends a Write whose producer the stream client could
// not declare in time: with the broker away the client retries its
// locator connection without end, so only a new session (a new
// environment, connected again with the relay's backoff) gets on.
var errDeclareTimeout = errors.New("rabbitmq sink: declaring a producer took too long; the broker is presumed away")

// declare declares a producer of stream on the connection's environment,
// giving up after timeout (errDeclareTimeout; the declaration goes on, and
// a producer it still makes is closed). The environment's Close is not
// safe beside a declaration in the client (both use its locator), so
// close leaves it to the last declaration to end.
func (c *conn) declare(name string, opts *stream.ProducerOptions, timeout time.Duration) (*stream.Producer, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errConnClosed
	}
	c.declaring++
	c.mu.Unlock()
	type result struct {
		sp  *stream.Producer
		err error
	}
	done := make(chan result, 1)
	abandoned := make(chan struct{})
	go func() {
		sp, err := c.env.NewProducer(name, opts)
		select {
		case done <- result{sp, err}:
		case <-abandoned:
			if err == nil {
				_ = sp.Close()
			}
		}
		c.mu.Lock()
		c.declaring--
		last := c.closed && c.producersClosed && c.declaring == 0
		c.mu.Unlock()
		if last {
			c.closeEnv()
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
//
// The stream client's calls can block without end: Send once the
// client's queue is full and its connection takes nothing (a node that
// stopped reading: a resource alarm, a paused or half-dead node). The
// records are sent on a goroutine of their own, and a Write that has not
// ended by its deadline (the confirmation timeout and a grace), or when
// ctx ends, gives that goroutine up: it returns errStuck (or ctx's
// error), leaves the connection to it, and the next Write connects anew.
// So does a Write that ended in errNoConfirmation or errDeclareTimeout.
func (p *Publisher) Write(ctx context.Context, recs []*publish.Record, out []publish.Outcome) error {
	if !p.open {
		return errors.New("rabbitmq sink: no session open")
	}
	for i := range out {
		out[i] = publish.Outcome{}
	}
	if p.conn == nil {
		c, err := p.connect()
		if err != nil {
			return err
		}
		p.conn = c
	}
	w := &write{recs: recs, out: p.outcomes(len(recs))}
	// The client fails a record it has not confirmed within
	// ConfirmTimeout; past that and a grace, it will not say.
	deadline := time.Now().Add(p.cfg.ConfirmTimeout + confirmGrace)
	done := make(chan error, 1)
	c := p.conn
	go func() { done <- c.send(ctx, w, deadline) }()
	timer := time.NewTimer(time.Until(deadline) + stuckGrace)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
		w.abandon()
		p.dropConn()
		return err
	case <-timer.C:
		w.abandon()
		p.dropConn()
		return errStuck
	}
	if errors.Is(err, errNoConfirmation) || errors.Is(err, errDeclareTimeout) {
		p.dropConn()
	}
	if err != nil {
		return err
	}
	copy(out, w.out)
	p.spare = w.out
	return nil
}

// outcomes is a slice of n outcomes, zero, for a Write.
func (p *Publisher) outcomes(n int) []publish.Outcome {
	out := p.spare
	p.spare = nil
	if cap(out) < n {
		return make([]publish.Outcome, n)
	}
	out = out[:n]
	clear(out)
	return out
}

// errStuck ends a Write whose records the stream client did not take in
// time (see Write).
var errStuck = errors.New("rabbitmq sink: the stream client took no more records in time (the node reads nothing from the connection); connecting again")

// stuckGrace is how long past its deadline a Write waits for the
// goroutine sending its records before it gives that goroutine up.
const stuckGrace = time.Second

// write is one Write's records and their outcomes, shared with the
// goroutine that sends them. Once the Write gave up (abandoned), the
// records are the caller's again: the goroutine reads them only under mu
// and while not abandoned.
type write struct {
	mu        sync.Mutex
	abandoned bool
	recs      []*publish.Record
	out       []publish.Outcome
}

// abandon takes the records back from the sending goroutine.
func (w *write) abandon() {
	w.mu.Lock()
	w.abandoned = true
	w.mu.Unlock()
}

// conn is one connection of a session: its stream environment and the
// producers declared on it, and what a Write's goroutine needs of the
// session (a Write given up leaves its goroutine the connection, which
// may outlive the session).
type conn struct {
	env            *stream.Environment
	guard          func() error
	name           string
	confirmTimeout time.Duration

	mu        sync.Mutex // guards producers, closed, producersClosed and declaring
	producers map[producerKey]*producer
	closed    bool
	// producersClosed is set once close closed the producers; declaring
	// counts the declarations in the client. The environment is closed
	// once both allow it (see declare).
	producersClosed bool
	declaring       int
	envClosed       sync.Once
	// unnamedSeq numbers the messages of the producers without a name
	// (only the goroutine sending uses it).
	unnamedSeq int64
}

// errConnClosed fails a record whose Write was given up: its connection
// was closed under it.
var errConnClosed = errors.New("rabbitmq sink: connection closed")

// send sends w's records in order and waits for every confirmation, until
// deadline (errNoConfirmation); it returns errConnClosed once w was
// abandoned.
func (c *conn) send(ctx context.Context, w *write, deadline time.Time) error {
	used := map[*producer]bool{}
	mode := map[string]bool{} // the producer kind each stream last took
	for i := range w.recs {
		w.mu.Lock()
		if w.abandoned {
			w.mu.Unlock()
			return errConnClosed
		}
		if c.guard != nil {
			if err := c.guard(); err != nil {
				w.mu.Unlock()
				return err
			}
		}
		rec := w.recs[i]
		topic := rec.Topic
		id, named := PublishingID(rec.Pos)
		named = named && c.name != ""
		if !named {
			c.unnamedSeq++
			id = c.unnamedSeq
		}
		msg := message(rec, id)
		w.mu.Unlock()
		if last, seen := mode[topic]; seen && last != named {
			// A switch of producer: what the other one sent first must be
			// stored first.
			if err := waitAll(ctx, used, deadline); err != nil {
				return err
			}
		}
		mode[topic] = named
		pr, err := c.producer(producerKey{stream: topic, named: named})
		if errors.Is(err, errDeclareTimeout) {
			return err
		}
		if err != nil {
			w.out[i] = classify(err)
			continue
		}
		used[pr] = true
		pr.expect(id, &w.out[i])
		if err := pr.sp.Send(msg); err != nil {
			pr.forget(id)
			w.out[i] = classify(err)
		}
	}
	if err := waitAll(ctx, used, deadline); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned {
		return errConnClosed
	}
	failLater(w.recs, w.out)
	return nil
}

// producer returns the producer of key, declaring it on first use.
func (c *conn) producer(key producerKey) (*producer, error) {
	c.mu.Lock()
	pr, ok := c.producers[key]
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errConnClosed
	}
	if ok && !pr.isClosed() {
		return pr, nil
	}
	opts := stream.NewProducerOptions().SetClientProvidedName("pgoutbox-relay").
		SetConfirmationTimeOut(c.confirmTimeout)
	if key.named {
		opts = opts.SetProducerName(c.name)
	}
	sp, err := c.declare(key.stream, opts, c.confirmTimeout)
	if err != nil {
		return nil, err
	}
	pr = newProducer(sp)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		go pr.close()
		return nil, errConnClosed
	}
	c.producers[key] = pr
	return pr, nil
}

// close closes the producers and the environment (once no declaration is
// in the client: see declare), waiting for that at most wait: a call into
// a client stuck on its connection may not return.
func (c *conn) close(wait time.Duration) {
	c.mu.Lock()
	c.closed = true
	prs := make([]*producer, 0, len(c.producers))
	for _, pr := range c.producers {
		prs = append(prs, pr)
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, pr := range prs {
			pr.close()
		}
		c.mu.Lock()
		c.producersClosed = true
		last := c.declaring == 0
		c.mu.Unlock()
		if last {
			c.closeEnv()
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
}

// closeEnv closes the environment, once.
func (c *conn) closeEnv() { c.envClosed.Do(func() { _ = c.env.Close() }) }

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
