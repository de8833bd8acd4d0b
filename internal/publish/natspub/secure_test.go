package natspub_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/natspub"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// clientTLS is a client configuration trusting n's CA, with n's client
// certificate when withCert.
func clientTLS(t *testing.T, n *testenv.SecureNATS, withCert bool) *tls.Config {
	t.Helper()
	return (&testenv.PKI{CAFile: n.CAFile, CertFile: n.CertFile, KeyFile: n.KeyFile}).ClientTLS(t, withCert)
}

// Over TLS with a client certificate and a credentials file the publisher
// writes and reads back; without the certificate it cannot connect, and
// with the credentials of a user the server does not know Open fails for
// good (no retry fixes refused credentials).
func TestOpenTLSAndCredentials(t *testing.T) {
	t.Parallel()
	n := testenv.NewSecureNATS(t)
	if _, err := n.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}}); err != nil {
		t.Fatal(err)
	}
	newPub := func(cfg natspub.Config) publish.Publisher {
		cfg.URL = n.URL
		p, err := publish.New(natspub.Name, publish.Config{Slot: "s", Settings: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	good := newPub(natspub.Config{TLS: clientTLS(t, n, true), CredentialsFile: n.CredsFile})
	if err := good.Open(ctx, publish.Session{}); err != nil {
		t.Fatalf("Open with certificate and credentials: %v", err)
	}
	if out := write(t, good, []*publish.Record{record("outbox.x", "a", "id-1", "{}")}); out[0].Verdict != publish.Confirmed {
		t.Fatalf("write: %+v", out[0])
	}
	var read int
	if _, err := good.(publish.Reader).Read(ctx, []string{"outbox.x"}, time.Time{}, func(*publish.Record, publish.Place) error {
		read++
		return nil
	}); err != nil || read != 1 {
		t.Fatalf("Read: %d records, %v; want 1", read, err)
	}

	noCert := newPub(natspub.Config{TLS: clientTLS(t, n, false), CredentialsFile: n.CredsFile})
	if err := noCert.Open(ctx, publish.Session{}); err == nil {
		t.Fatal("Open without a client certificate succeeded")
	}
	stranger := newPub(natspub.Config{TLS: clientTLS(t, n, true), CredentialsFile: n.OtherCredsFile})
	if err := stranger.Open(ctx, publish.Session{}); !relayerr.IsPermanent(err) {
		t.Fatalf("Open with an unknown user's credentials: %v, want a permanent error", err)
	}
}
