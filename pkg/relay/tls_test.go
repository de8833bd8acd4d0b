package relay_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A database URL that may reach a remote host without verified TLS is
// warned about once at New, naming the host, and refused under RequireTLS;
// local and verified connections pass silently.
func TestDatabaseTLSWarningAndRequireTLS(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	for _, tc := range []struct {
		url  string
		warn string // host named in the warning; "" for none
	}{
		{"postgres://app@db.example.com/app", "db.example.com:5432 (may connect without TLS)"},
		{"postgres://app@db.example.com/app?sslmode=require", "db.example.com:5432 (TLS without verifying"},
		{"host=10.1.2.3 user=app sslmode=prefer", "10.1.2.3:5432"},
		{"postgres://app@db.example.com/app?sslmode=verify-full", ""},
		{"postgres://app@127.0.0.1/app?sslmode=disable", ""},
		{"host=/var/run/postgresql user=app", ""},
	} {
		var logs testenv.SyncBuffer
		cfg := &relay.Config{DatabaseURL: tc.url, Kafka: relay.KafkaConfig{Brokers: []string{"127.0.0.1:9092"}},
			Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		if _, err := relay.New(cfg); err != nil {
			t.Fatalf("New(%q): %v", tc.url, err)
		}
		got := logs.String()
		switch {
		case tc.warn == "" && strings.Contains(got, "TLS"):
			t.Errorf("New(%q) warned:\n%s", tc.url, got)
		case tc.warn != "" && (!strings.Contains(got, tc.warn) || strings.Count(got, "level=WARN") != 1):
			t.Errorf("New(%q) logged %q, want one warning naming %q", tc.url, got, tc.warn)
		}

		cfg.RequireTLS = true
		cfg.Registerer = prometheus.NewRegistry()
		_, err := relay.New(cfg)
		if tc.warn == "" && err != nil {
			t.Errorf("New(%q) with RequireTLS: %v", tc.url, err)
		}
		if tc.warn != "" && (!errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), "verify-full")) {
			t.Errorf("New(%q) with RequireTLS: %v, want a configuration error naming verify-full", tc.url, err)
		}
	}
}

// selfSignedTLS returns a server configuration with a certificate for
// 127.0.0.1 and a client configuration that trusts only that certificate.
func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	return server, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// The relay writes to a broker that speaks only TLS, verifying its
// certificate; with a client that does not trust it, nothing is written
// and the relay keeps retrying.
func TestKafkaOverTLS(t *testing.T) {
	t.Parallel()
	server, client := selfSignedTLS(t)
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			t.Parallel()
			cfg := client
			if !trusted {
				cfg = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
			}
			b := setup(t, func(c *relay.Config) { c.Kafka.TLS = cfg })
			b.kafka = testenv.NewKafka(t, kfake.TLS(server))
			b.cfg.Kafka.Brokers = b.kafka.Brokers
			seen := watchProduce(b.kafka, "outbox.order")
			b.start(t)
			var msgs []outbox.Message
			for i := range 10 {
				msgs = append(msgs, msg(fmt.Sprintf("agg-%d", i%3), i))
			}
			b.insert(t, msgs...)
			records := func() int {
				seen.mu.Lock()
				defer seen.mu.Unlock()
				return seen.records
			}
			if !trusted {
				testenv.WaitFor(t, 30*time.Second, "failed Kafka writes", func() (bool, error) {
					return b.metric(t, "pgoutbox_relay_publish_errors_total") >= 2, nil
				})
				if n, p := records(), b.metric(t, "pgoutbox_relay_events_published_total"); n != 0 || p != 0 {
					t.Fatalf("the broker received %d records, events_published_total %v, from a relay that does not trust it; want 0, 0", n, p)
				}
				return
			}
			testenv.WaitFor(t, 30*time.Second, "10 records received over TLS", func() (bool, error) { return records() == 10, nil })
			testenv.WaitFor(t, 30*time.Second, "events_published_total 10", func() (bool, error) {
				return b.metric(t, "pgoutbox_relay_events_published_total") == 10, nil
			})
		})
	}
}
