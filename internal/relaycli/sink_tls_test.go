package relaycli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// relay run --sink nats reaches a server that requires TLS with a client
// certificate and a user's credentials, through --sink-tls-ca-file,
// --sink-tls-cert-file, --sink-tls-key-file and --sink-credentials-file:
// every row lands, and nothing of the credentials file is printed.
func TestRunSinkNATSOverTLSWithCredentials(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	n := testenv.NewSecureNATS(t)
	s, err := n.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, append([]string{"run", "--sink", "nats", "--sink-url", n.URL,
		"--sink-tls-ca-file", n.CAFile, "--sink-tls-cert-file", n.CertFile, "--sink-tls-key-file", n.KeyFile,
		"--sink-credentials-file", n.CredsFile,
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}, f.args...)...)
	for i := range 4 {
		f.exec(t, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('order', $1, 'created', $2, '{}')`,
			fmt.Sprintf("a%d", i%2), fmt.Sprintf("bk-%d", i))
	}
	testenv.WaitFor(t, 60*time.Second, "four messages in the stream", func() (bool, error) {
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs >= 4, nil
	})
	r.stop(t)
	for _, secret := range n.Secrets {
		if strings.Contains(r.stderr.String(), secret) {
			t.Fatalf("the logs hold a secret of the credentials file:\n%s", r.stderr.String())
		}
	}
}

// The sink's TLS and credentials flags are refused where they cannot
// apply: with the Kafka sink, a credentials file for RabbitMQ, a
// credentials file that cannot be read, a client certificate without its
// key.
func TestSinkTLSFlagsMisused(t *testing.T) {
	t.Parallel()
	db := "postgres://u@127.0.0.1:1/db"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--brokers", "127.0.0.1:1", "--sink-tls-ca-file", "ca.pem"}, []string{"--sink-tls-ca-file", "--sink nats or rabbitmq"}},
		{[]string{"--sink", "rabbitmq", "--sink-url", "rabbitmq-stream://h:5552/", "--sink-credentials-file", "x.creds"}, []string{"--sink-credentials-file", "--sink nats only"}},
		{[]string{"--sink", "nats", "--sink-url", "nats://h:4222", "--sink-credentials-file", "/nonexistent/x.creds"}, []string{"--sink-credentials-file", "no such file"}},
		{[]string{"--sink", "nats", "--sink-url", "nats://h:4222", "--sink-tls-cert-file", "c.pem"}, []string{"--sink-tls-cert-file needs --sink-tls-key-file"}},
	} {
		r := cli(t, append([]string{"run", "--database-url", db}, c.args...)...)
		wantCode(t, r, 2)
		wantOneErrorLine(t, r.stderr, c.want...)
	}
}
