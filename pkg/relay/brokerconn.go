package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// connsPerBroker bounds the producer's connections to one broker: the
// requests of a call to one broker go on that many at once, the rest after
// them on the same connections.
const connsPerBroker = 4

// connIdleTimeout is how long a connection may sit unused before it is
// closed rather than written on: brokers close idle connections
// (connections.max.idle.ms, 10 minutes by default), and a write on one
// they closed fails the call. kafka-go's Transport uses the same 30s.
const connIdleTimeout = 30 * time.Second

// brokerConns are the producer's connections to the Kafka brokers. A
// produce request is written and its answer read on the goroutine that
// sends it. kafka-go's Transport (which the relay keeps for metadata)
// hands each request to a connection goroutine and the answer back, two
// goroutine switches per request: at 1,000 single-row transactions a
// second the relay used 31% of a core with it, 25.5% without (medians of
// 14 and 8 runs on the 2-core bench machine; draining a backlog, where a
// request holds many records, the two were even).
//
// Dialling does what the Transport does: TLS (the server name is the
// broker's host unless the configuration sets one), API version
// negotiation, then SASL.
type brokerConns struct {
	tls      *tls.Config
	sasl     sasl.Mechanism
	clientID string

	mu    sync.Mutex
	addrs map[int32]brokerAddr // by broker ID, from the latest metadata
	idle  map[connKey]*brokerConn
}

// brokerAddr is where a broker listens.
type brokerAddr struct {
	host string
	port int32
}

func (a brokerAddr) String() string { return net.JoinHostPort(a.host, strconv.Itoa(int(a.port))) }

// connKey names one of the connections to a broker.
type connKey struct {
	broker int32
	slot   int
}

// brokerConn is an open connection to a broker.
type brokerConn struct {
	pc   *protocol.Conn
	addr brokerAddr
	used time.Time
}

func newBrokerConns(c *Config, clientID string) *brokerConns {
	return &brokerConns{tls: c.TLS, sasl: c.SASL, clientID: clientID,
		addrs: make(map[int32]brokerAddr), idle: make(map[connKey]*brokerConn)}
}

// learn notes the brokers' addresses from a metadata answer.
func (b *brokerConns) learn(brokers []metadataAPI.ResponseBroker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, br := range brokers {
		b.addrs[br.NodeID] = brokerAddr{br.Host, br.Port}
	}
}

// roundTrip sends req on connection k and returns the broker's answer.
// The connection is k's own while the request is out; on any error it is
// closed (the next request dials again). When ctx ends, the exchange ends
// at once (the connection's deadline is set in the past) and roundTrip
// returns ctx's error.
func (b *brokerConns) roundTrip(ctx context.Context, k connKey, req protocol.Message) (protocol.Message, error) {
	bc, err := b.take(ctx, k)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = bc.pc.SetDeadline(time.Unix(1, 0)) })
	res, err := bc.pc.RoundTrip(req)
	stopped := stop()
	if err == nil && stopped {
		b.put(k, bc)
		return res, nil
	}
	bc.pc.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("kafka broker %d at %s: %w", k.broker, bc.addr, err)
}

// take returns connection k, dialling it when it is not open, has been
// idle too long, or its broker has moved.
func (b *brokerConns) take(ctx context.Context, k connKey) (*brokerConn, error) {
	b.mu.Lock()
	addr, known := b.addrs[k.broker]
	bc := b.idle[k]
	delete(b.idle, k)
	b.mu.Unlock()
	if bc != nil && (bc.addr != addr || time.Since(bc.used) > connIdleTimeout) {
		bc.pc.Close()
		bc = nil
	}
	if bc != nil {
		return bc, nil
	}
	if !known {
		return nil, fmt.Errorf("kafka broker %d is not in the cluster's metadata: %w", k.broker, protocol.ErrNoLeader)
	}
	pc, err := b.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("kafka broker %d at %s: %w", k.broker, addr, err)
	}
	return &brokerConn{pc: pc, addr: addr}, nil
}

// put gives connection k back after a successful exchange.
func (b *brokerConns) put(k connKey, bc *brokerConn) {
	bc.used = time.Now()
	b.mu.Lock()
	old := b.idle[k]
	b.idle[k] = bc
	b.mu.Unlock()
	if old != nil {
		old.pc.Close()
	}
}

// dial opens a connection to the broker at addr, ready for requests.
func (b *brokerConns) dial(ctx context.Context, addr brokerAddr) (_ *protocol.Conn, err error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			nc.Close()
		}
	}()
	if b.tls != nil {
		cfg := b.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = addr.host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		nc = tc
	}
	pc := protocol.NewConn(nc, b.clientID)
	stop := context.AfterFunc(ctx, func() { _ = pc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := negotiateVersions(pc); err != nil {
		return nil, err
	}
	if b.sasl != nil {
		md := &sasl.Metadata{Host: addr.host, Port: int(addr.port)}
		if err := authenticate(sasl.WithMetadata(ctx, md), pc, b.sasl); err != nil {
			return nil, err
		}
	}
	if !stop() {
		return nil, ctx.Err()
	}
	return pc, nil
}

// negotiateVersions asks the broker which API versions it speaks and sets
// the highest each side knows on pc.
func negotiateVersions(pc *protocol.Conn) error {
	r, err := pc.RoundTrip(new(apiversions.Request))
	if err != nil {
		return err
	}
	res := r.(*apiversions.Response)
	if res.ErrorCode != 0 {
		return fmt.Errorf("negotiating API versions: %w", kafka.Error(res.ErrorCode))
	}
	ver := make(map[protocol.ApiKey]int16, len(res.ApiKeys))
	for _, k := range res.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		ver[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	pc.SetVersions(ver)
	return nil
}

// authenticate runs the SASL exchange of mechanism on pc.
func authenticate(ctx context.Context, pc *protocol.Conn, mechanism sasl.Mechanism) error {
	r, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: mechanism.Name()})
	if err != nil {
		return err
	}
	if code := r.(*saslhandshake.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	sess, state, err := mechanism.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		r, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// A broker may tell of a failed exchange by closing the
			// connection.
			return fmt.Errorf("%w: the broker closed the connection", kafka.SASLAuthenticationFailed)
		}
		if err != nil {
			return err
		}
		res := r.(*saslauthenticate.Response)
		if res.ErrorCode != 0 {
			if res.ErrorMessage != "" {
				return fmt.Errorf("%w: %s", kafka.Error(res.ErrorCode), res.ErrorMessage)
			}
			return kafka.Error(res.ErrorCode)
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// close closes the idle connections (none is out when the producer's
// caller closes it).
func (b *brokerConns) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, bc := range b.idle {
		bc.pc.Close()
		delete(b.idle, k)
	}
}
