package faults

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

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

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
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
		if _, err := dst.Write(frame); err != nil {
			return
		}
		if n >= 2 && int16(binary.BigEndian.Uint16(frame[4:6])) == kmsg.EndTxn.Int16() && p.armed.CompareAndSwap(true, false) {
			p.cuts.Add(1)
			return
		}
	}
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
