package pgtls

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Weakness is one way a connection string may expose its traffic.
type Weakness struct {
	// Host is the remote host (and port) concerned.
	Host string
	// Plaintext is true when the connection may be made without TLS
	// (sslmode disable, allow or prefer); false when it is encrypted but
	// the server's certificate is not verified (sslmode=require).
	Plaintext bool
}

func (w Weakness) String() string {
	if w.Plaintext {
		return w.Host + " (may connect without TLS)"
	}
	return w.Host + " (TLS without verifying the server certificate)"
}

// Check parses conn (URL or keyword/value form, with the PG* environment
// variables pgx also reads) and returns the weaknesses of every
// non-local host it may connect to. An empty result means every
// connection is local or verified.
func Check(conn string) ([]Weakness, error) {
	cfg, err := pgconn.ParseConfig(conn)
	if err != nil {
		return nil, err
	}
	at := []attempt{newAttempt(cfg.Host, cfg.Port, cfg.TLSConfig)}
	for _, f := range cfg.Fallbacks {
		at = append(at, newAttempt(f.Host, f.Port, f.TLSConfig))
	}
	// pgconn lists each host once per TLS mode it may try (prefer: TLS,
	// then plaintext); a host is as weak as its weakest attempt.
	var out []Weakness
	index := map[string]int{}
	for _, a := range at {
		if Local(a.host) || a.safe {
			continue
		}
		hp := net.JoinHostPort(a.host, fmt.Sprint(a.port))
		w := Weakness{Host: hp, Plaintext: !a.tls}
		if i, ok := index[hp]; ok {
			out[i].Plaintext = out[i].Plaintext || w.Plaintext
			continue
		}
		index[hp] = len(out)
		out = append(out, w)
	}
	return out, nil
}

// attempt is one way pgconn may connect: a host and its TLS settings.
type attempt struct {
	host string
	port uint16
	tls  bool // encrypted
	safe bool // encrypted, and the server certificate is verified
}

func newAttempt(host string, port uint16, c *tls.Config) attempt {
	return attempt{host: host, port: port, tls: c != nil,
		safe: c != nil && (!c.InsecureSkipVerify || c.VerifyPeerCertificate != nil)}
}

// Local reports whether host is a Unix socket directory or a loopback
// name or address, where traffic does not cross a network.
func Local(host string) bool {
	if strings.HasPrefix(host, "/") || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Describe joins weaknesses into one line for a log or an error.
func Describe(ws []Weakness) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	return strings.Join(s, ", ")
}
