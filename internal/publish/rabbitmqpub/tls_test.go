package rabbitmqpub_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// Over a rabbitmq-stream+tls:// URI, with the CA and the client
// certificate the server requires, records are written and read back;
// without the client certificate, or without the CA (the system's roots
// do not know the server's), nothing connects.
func TestOverTLS(t *testing.T) {
	t.Parallel()
	r := testenv.NewRabbitMQTLS(t)
	name := "outbox.tls"
	if err := r.Environment(t).DeclareStream(name, &stream.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	newPub := func(conf *tls.Config) publish.Publisher {
		p, err := publish.New(rabbitmqpub.Name, publish.Config{Slot: "slot1", Settings: rabbitmqpub.Config{URI: r.TLSStreamURI, TLS: conf, Incarnation: "inc1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	p := newPub(r.PKI.ClientTLS(t, true))
	if err := p.Open(t.Context(), publish.Session{}); err != nil {
		t.Fatalf("Open over TLS: %v", err)
	}
	recs := records(name, 4, 0x1_0000_0000)
	write(t, p, recs)
	p.Close()
	var read int
	if _, err := p.(publish.Reader).Read(t.Context(), []string{name}, time.Time{}, func(*publish.Record, publish.Place) error {
		read++
		return nil
	}); err != nil || read != len(recs) {
		t.Fatalf("Read over TLS: %d records, %v; want %d", read, err, len(recs))
	}
	if got := r.ReadStream(t, name); len(got) != len(recs) {
		t.Fatalf("stream holds %d messages, want %d", len(got), len(recs))
	}
	for _, tc := range []struct {
		name string
		conf *tls.Config
	}{{"no client certificate", r.PKI.ClientTLS(t, false)}, {"system roots", nil}} {
		if err := newPub(tc.conf).Open(t.Context(), publish.Session{}); err == nil {
			t.Errorf("%s: Open succeeded, want a failed handshake", tc.name)
		}
	}
}
