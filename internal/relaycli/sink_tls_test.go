package relaycli_test

import (
	"strings"
	"testing"

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
	_, r := relayToNATS(t, f, n.JetStream(t), 4, "--sink", "nats", "--sink-url", n.URL,
		"--sink-tls-ca-file", n.CAFile, "--sink-tls-cert-file", n.CertFile, "--sink-tls-key-file", n.KeyFile,
		"--sink-credentials-file", n.CredsFile, "--log-level", "debug")
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
