package testenv

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy for fault injection between a client and a server
// (say, a relay and Postgres). Paused, it behaves like a blackholing
// middlebox (a frozen NAT entry, a dead load balancer): it keeps every
// connection open and its kernel keeps acknowledging what it receives,
// but it forwards no byte in either direction; new connections are
// accepted and held the same way. Resume forwards again, held bytes first.
type Proxy struct {
	// Addr is the proxy's listening address ("127.0.0.1:port").
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup
	done   chan struct{}

	mu     sync.Mutex
	open   chan struct{} // closed while forwarding
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy starts a proxy to target ("host:port"), forwarding, that is
// closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, done: make(chan struct{}),
		open: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// ProxyURL returns the database URL u (postgres://…) with its host and
// port replaced by the proxy's address.
func (p *Proxy) ProxyURL(t testing.TB, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("proxy: %v", redact(err))
	}
	parsed.Host = p.Addr
	return parsed.String()
}

// Pause stops forwarding, keeping every connection open.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // paused already
	}
}

// Resume forwards again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops the proxy and closes every connection. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// gate waits until the proxy forwards; false when it closed meanwhile.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.done:
		return false
	}
}

// track registers c for Close; false when the proxy is closed already.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
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
}

// serve connects client to the target once the proxy forwards, then
// copies both ways.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.gate() {
		p.untrack(client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		p.untrack(client)
		return
	}
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); p.copy(server, client) }()
	go func() { defer both.Done(); p.copy(client, server) }()
	both.Wait()
	p.untrack(client, server)
}

// copy forwards src to dst, holding each chunk while the proxy is paused,
// until src ends; then it closes both (a dropped connection ends the
// other side too, as through a real middlebox).
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil { // EOF or a failed connection alike
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}
