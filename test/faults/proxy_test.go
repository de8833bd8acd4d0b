package faults

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cutProxy forwards TCP between the relay and the broker's proxied
// listener. Armed, it cuts the connection that carries the next EndTxn
// request right after forwarding it: the coordinator gets the request,
// the relay never gets the answer (the "delayed EndTxn" of Jepsen's Kafka
// analysis). It reads the client's stream as Kafka frames only far enough
// to see each request's API key (the 4-byte length and the 2-byte key);
// franz-go's kmsg names the key.
type cutProxy struct {
	addr   string
	target string
	ln     net.Listener

	armed atomic.Bool
	cuts  atomic.Int64

	// The delayed variant: holdArmed holds the next EndTxn back instead
	// (the relay's connection is cut without it), and delivers it on a
	// connection of its own once the relay retried it and wrote records
	// of a later transaction.
	holdArmed atomic.Bool
	held      atomic.Pointer[[]byte]
	retried   atomic.Bool // an EndTxn passed since the hold
	delivered atomic.Int64

	// freeze, when set, is called at the next EndTxn instead of
	// forwarding it (the relay's connection is cut without it).
	freeze atomic.Pointer[func()]

	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	verdicts []string // the broker's answers to EndTxn requests delivered late
}

// newCutProxy listens on a free loopback port; start forwards to target.
func newCutProxy(t testing.TB) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &cutProxy{addr: ln.Addr().String(), ln: ln, conns: make(map[net.Conn]struct{})}
}

// start forwards every connection to target until close.
func (p *cutProxy) start(target string) {
	p.target = target
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				return
			}
			p.wg.Add(1)
			go p.serve(c)
		}
	}()
}

// arm cuts the connection of the next EndTxn request.
func (p *cutProxy) arm() { p.armed.Store(true) }

func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *cutProxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		p.untrack(client)
		return
	}
	var both sync.WaitGroup
	both.Add(2)
	go func() { // broker -> relay: bytes as they come
		defer both.Done()
		_, _ = io.Copy(client, server)
		p.untrack(client, server)
	}()
	go func() { // relay -> broker: frame by frame
		defer both.Done()
		p.forwardRequests(server, client)
		p.untrack(client, server)
	}()
	both.Wait()
}

// forwardRequests copies Kafka request frames from src to dst; after an
// EndTxn frame while armed it returns, and serve closes both sides.
func (p *cutProxy) forwardRequests(dst, src net.Conn) {
	var size [4]byte
	for {
		if _, err := io.ReadFull(src, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		frame := make([]byte, 4+int(n))
		copy(frame, size[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return
		}
		key := int16(-1)
		if n >= 2 {
			key = int16(binary.BigEndian.Uint16(frame[4:6]))
		}
		if f := p.freeze.Load(); key == kmsg.EndTxn.Int16() && f != nil && p.freeze.CompareAndSwap(f, nil) {
			(*f)()
			p.cuts.Add(1)
			return
		}
		if key == kmsg.EndTxn.Int16() && p.holdArmed.CompareAndSwap(true, false) {
			p.retried.Store(false)
			p.held.Store(&frame)
			p.cuts.Add(1)
			return
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
		switch {
		case key == kmsg.EndTxn.Int16() && p.armed.CompareAndSwap(true, false):
			p.cuts.Add(1)
			return
		case key == kmsg.EndTxn.Int16() && p.held.Load() != nil:
			p.retried.Store(true)
		case key == kmsg.Produce.Int16() && p.retried.Load():
			if held := p.held.Swap(nil); held != nil {
				p.deliver(*held)
			}
		}
	}
}

// armHold holds the next EndTxn back and delivers it late (see holdArmed).
func (p *cutProxy) armHold() { p.holdArmed.Store(true) }

// deliver sends a held request frame to the broker on a connection of its
// own and waits for the answer, which nobody reads.
func (p *cutProxy) deliver(frame []byte) {
	c, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer c.Close()
	if _, err := c.Write(frame); err != nil {
		return
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return
	}
	// The broker's verdict on the stale request, for the log: the
	// correlation ID, the header's tag buffer when flexible, the body.
	resp := kmsg.NewPtrEndTxnResponse()
	resp.SetVersion(int16(binary.BigEndian.Uint16(frame[6:8])))
	skip := 4
	if resp.IsFlexible() {
		skip++ // an empty tag buffer
	}
	answer := "unreadable answer"
	if len(body) >= skip && resp.ReadFrom(body[skip:]) == nil {
		answer = fmt.Sprintf("error code %d (%v)", resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	}
	p.mu.Lock()
	p.verdicts = append(p.verdicts, answer)
	p.mu.Unlock()
	p.delivered.Add(1)
}

// lastVerdict is the broker's answer to the last EndTxn delivered late.
func (p *cutProxy) lastVerdict() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.verdicts) == 0 {
		return ""
	}
	return p.verdicts[len(p.verdicts)-1]
}

// close stops the proxy and every connection, and waits for them.
func (p *cutProxy) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}
