package producer

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds dialling one broker, TLS handshake included.
const dialTimeout = 10 * time.Second

// dialer returns the client's Dialer: TCP, then TLS when tlsCfg is set,
// with a connection that asks guard (when set) before every write, the
// last moment before bytes leave the process, and gives the write the
// deadline writeBy (when set and earlier than the client's own). The
// guard sits under TLS, so the handshake and every record are covered.
func dialer(tlsCfg *tls.Config, guard func() error, writeBy func() time.Time) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if guard != nil {
			c = &guardedConn{Conn: c, guard: guard, writeBy: writeBy}
		}
		if tlsCfg == nil {
			return c, nil
		}
		cfg := tlsCfg
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			if h, _, err := net.SplitHostPort(host); err == nil {
				cfg.ServerName = h
			} else {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}

// guardedConn is a connection that refuses to write while guard fails.
// The guard is a check, and the write comes after it: a process frozen
// between the two would send the bytes when it resumes, however late. So
// the write also gets writeBy as its deadline (the earlier of it and the
// client's own): a write that starts past it fails before sending a byte
// (net.Conn checks the deadline before the system call).
type guardedConn struct {
	net.Conn
	guard   func() error
	writeBy func() time.Time

	mu       sync.Mutex
	deadline time.Time // the client's write deadline; zero for none
}

func (c *guardedConn) Write(p []byte) (int, error) {
	if err := c.guard(); err != nil {
		return 0, err
	}
	if c.writeBy != nil {
		by := c.writeBy()
		c.mu.Lock()
		own := c.deadline
		c.mu.Unlock()
		if own.IsZero() || by.Before(own) {
			if err := c.Conn.SetWriteDeadline(by); err != nil {
				return 0, err
			}
			defer func() { _ = c.Conn.SetWriteDeadline(own) }()
		}
	}
	return c.Conn.Write(p)
}

// SetDeadline remembers the client's write deadline (see Write).
func (c *guardedConn) SetDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline remembers the client's write deadline (see Write).
func (c *guardedConn) SetWriteDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *guardedConn) remember(t time.Time) {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
}
