package natspub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Name is the publisher's name in the registry (relay run --sink nats).
const Name = "nats"

func init() { publish.Register(Name, New) }

// Config is the NATS publisher's settings (publish.Config.Settings).
type Config struct {
	// URL is the server URL, or several separated by commas
	// ("nats://127.0.0.1:4222"). Required.
	URL string
	// TLS enables TLS to the servers when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// CredentialsFile is a NATS credentials file (JWT and NKey seed).
	// Defaults to none.
	CredentialsFile string
	// Buckets is how many subjects the records of one topic spread over,
	// by their key's hash. Defaults to 16.
	Buckets int
	// AckTimeout bounds the wait for a PubAck. Defaults to 30s.
	AckTimeout time.Duration
}

// maxInFlight bounds the publishes awaiting their PubAck within a Write.
const maxInFlight = 1024

// Publisher writes records to NATS JetStream.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	nc    *nats.Conn
	js    jetstream.JetStream
	guard func() error
	// streams is what the session learned of the streams.
	streams streams
}

// New makes a NATS publisher from c (c.Settings a Config); it connects
// to nothing (Open does).
func New(c publish.Config) (publish.Publisher, error) {
	cfg, ok := c.Settings.(Config)
	if !ok {
		return nil, fmt.Errorf("%w: nats sink: settings %T, want natspub.Config", relaytype.ErrConfig, c.Settings)
	}
	p := &Publisher{cfg: cfg, log: c.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	switch {
	case p.cfg.URL == "":
		return nil, fmt.Errorf("%w: nats sink: a server URL is required", relaytype.ErrConfig)
	case p.cfg.Buckets < 0:
		return nil, fmt.Errorf("%w: nats sink: %d buckets", relaytype.ErrConfig, p.cfg.Buckets)
	case p.cfg.Buckets == 0:
		p.cfg.Buckets = 16
	}
	if p.cfg.AckTimeout <= 0 {
		p.cfg.AckTimeout = 30 * time.Second
	}
	return p, nil
}

// Open connects. The publisher has no exactly-once mode and cannot
// fence: a session with an Identity or a Fence is refused.
func (p *Publisher) Open(ctx context.Context, s publish.Session) error {
	p.Close()
	if s.Identity != "" {
		return relayerr.Permanent(errors.New("nats sink: exactly-once mode is not supported; JetStream deduplicates on Nats-Msg-Id instead"))
	}
	if s.Fence != "" {
		return relayerr.Permanent(errors.New("nats sink: fenced writes (--fence-writes) are not supported"))
	}
	nc, err := p.connect(ctx)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxInFlight),
		jetstream.WithPublishAsyncTimeout(p.cfg.AckTimeout))
	if err != nil {
		nc.Close()
		return fmt.Errorf("nats sink: %w", err)
	}
	p.nc, p.js, p.guard = nc, js, s.Guard
	p.streams = streams{ofSubject: map[string]string{}, atomic: map[string]bool{}}
	return nil
}

// connect connects to the servers with the publisher's TLS and
// credentials; a refused authentication is permanent.
func (p *Publisher) connect(ctx context.Context) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("pgoutbox-relay"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if p.cfg.TLS != nil {
		opts = append(opts, nats.Secure(p.cfg.TLS))
	}
	if p.cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(p.cfg.CredentialsFile))
	}
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(p.cfg.URL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			return nil, relayerr.Permanent(fmt.Errorf("nats sink: %w", err))
		}
		return nil, fmt.Errorf("nats sink: connect: %w", err)
	}
	return nc, nil
}

// Subject is the subject of a record of topic with key: the topic, a dot
// and the key's bucket of buckets.
func Subject(topic string, key []byte, buckets int) string {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return topic + "." + strconv.FormatUint(uint64(h.Sum32()%uint32(buckets)), 10)
}

// message is rec as a NATS message.
func (p *Publisher) message(rec *publish.Record) *nats.Msg {
	m := &nats.Msg{Subject: Subject(rec.Topic, rec.Key, p.cfg.Buckets), Data: rec.Value, Header: nats.Header{}}
	for _, h := range rec.Headers {
		// Direct assignment keeps the name's case (Header.Set would too,
		// but Add appends): the last of a repeated name wins, as in the
		// inbox's reading of a record.
		m.Header[h.Key] = []string{string(h.Value)}
		if h.Key == contract.HeaderMessageID {
			m.Header[jetstream.MsgIDHeader] = []string{string(h.Value)}
		}
	}
	return m
}

// writeChunk publishes msgs[idx] (at most maxInFlight) asynchronously, in
// order, and waits for their PubAcks.
func (p *Publisher) writeChunk(ctx context.Context, msgs []*nats.Msg, idx []int, out []publish.Outcome) error {
	futures := make([]jetstream.PubAckFuture, len(idx))
	for j, i := range idx {
		if p.guard != nil {
			if err := p.guard(); err != nil {
				return err
			}
		}
		f, err := p.js.PublishMsgAsync(msgs[i])
		if err != nil {
			out[i] = classify(err)
			continue
		}
		futures[j] = f
	}
	for j, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.Ok():
			out[idx[j]] = publish.Outcome{Verdict: publish.Confirmed}
		case err := <-f.Err():
			out[idx[j]] = classify(err)
		}
	}
	return nil
}

// Close ends the session: publishes still awaiting a PubAck fail.
func (p *Publisher) Close() {
	if p.nc != nil {
		p.nc.Close()
	}
	p.nc, p.js, p.guard = nil, nil, nil
}
