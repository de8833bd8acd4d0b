package producer

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// dialTimeout bounds dialling one broker, TLS handshake included.
const dialTimeout = 10 * time.Second

// dialer returns the client's Dialer: TCP, then TLS when tlsCfg is set,
// with a connection that asks guard (when set) before every write, the
// last moment before bytes leave the process. The guard sits under TLS,
// so the handshake and every record are covered.
func dialer(tlsCfg *tls.Config, guard func() error) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		if guard != nil {
			c = &guardedConn{Conn: c, guard: guard}
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
type guardedConn struct {
	net.Conn
	guard func() error
}

func (c *guardedConn) Write(p []byte) (int, error) {
	if err := c.guard(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
