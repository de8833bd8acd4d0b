package relaycli

import (
	"net/url"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/internal/kafkaflags"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// The flags that choose the broker of relay run.
const (
	flagSink            = "sink"
	flagSinkURL         = "sink-url"
	flagSinkTLS         = "sink-tls"
	flagSinkTLSCAFile   = "sink-tls-ca-file"
	flagSinkTLSCertFile = "sink-tls-cert-file"
	flagSinkTLSKeyFile  = "sink-tls-key-file"
	flagSinkCredsFile   = "sink-credentials-file"

	catSink = "Sink"
)

// Sinks relay run accepts besides Kafka.
const (
	sinkKafka    = "kafka"
	sinkNATS     = "nats"
	sinkRabbitMQ = "rabbitmq"
)

// sinkFlags choose the broker relay run publishes to.
func sinkFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag(flagSink, catSink, sinkKafka,
			"broker to publish to: kafka, nats (JetStream: subject = topic + the aggregate's bucket, Nats-Msg-Id = message ID) or rabbitmq (streams: a stream per topic); see docs/sinks.md"),
		stringFlag(flagSinkURL, catSink, "",
			"address of the nats or rabbitmq broker: nats://host:4222 (comma separated for several) or rabbitmq-stream://user:password@host:5552/vhost; it may hold a password (never printed): prefer RELAY_SINK_URL or RELAY_SINK_URL_FILE"),
		boolFlag(flagSinkTLS, catSink,
			"connect to the nats or rabbitmq broker with TLS, verified by the system roots (implied by any --sink-tls-* file, and by a tls:// or rabbitmq-stream+tls:// URL)"),
		stringFlag(flagSinkTLSCAFile, catSink, "", "PEM CA bundle to verify the nats or rabbitmq broker (default: the system roots)"),
		stringFlag(flagSinkTLSCertFile, catSink, "", "PEM client certificate for mutual TLS to the nats or rabbitmq broker (with --sink-tls-key-file)"),
		stringFlag(flagSinkTLSKeyFile, catSink, "", "PEM client key for mutual TLS to the nats or rabbitmq broker (with --sink-tls-cert-file)"),
		stringFlag(flagSinkCredsFile, catSink, "",
			"NATS credentials file (.creds: a user JWT and its NKey seed), read at every connection and never printed; --sink nats only"),
	}
}

// sinkTLS are the TLS flags of a nats or rabbitmq sink.
var sinkTLS = kafkaflags.TLSNames{On: flagSinkTLS, CAFile: flagSinkTLSCAFile, CertFile: flagSinkTLSCertFile, KeyFile: flagSinkTLSKeyFile}

// isKafkaSink reports whether --sink names Kafka.
func isKafkaSink(c *cli.Context) bool {
	s := c.String(flagSink)
	return s == "" || s == sinkKafka
}

// sinkConfig reads --sink and --sink-url into cfg, teaching sc the URL's
// password first.
func sinkConfig(c *cli.Context, sc *scrubber, cfg *relay.Config) error {
	secret, err := cliutil.ReadSecret(c, flagSinkURL, envName(flagSinkURL))
	if err != nil {
		return err
	}
	if secret.Value != "" {
		addSinkURL(sc, secret.Value)
		if cliutil.URLExposed(secret) {
			sc.exposed = append(sc.exposed, flagSinkURL)
		}
	}
	switch s := c.String(flagSink); s {
	case "", sinkKafka:
		if secret.Value != "" {
			return usagef("--%s is for --%s %s or %s; Kafka takes --%s", flagSinkURL, flagSink, sinkNATS, sinkRabbitMQ, flagBrokers)
		}
		for _, f := range []string{flagSinkTLS, flagSinkTLSCAFile, flagSinkTLSCertFile, flagSinkTLSKeyFile, flagSinkCredsFile} {
			if c.IsSet(f) {
				return usagef("--%s is for --%s %s or %s; Kafka takes --%s and the other --kafka-* flags", f, flagSink, sinkNATS, sinkRabbitMQ, kafkaflags.FlagTLS)
			}
		}
	case sinkNATS, sinkRabbitMQ:
		if secret.Value == "" {
			return usagef("--%s %s needs --%s (or %s)", flagSink, s, flagSinkURL, envVar(flagSinkURL)[0])
		}
		cfg.Sink, cfg.SinkURL = s, secret.Value
		return sinkSecurity(c, cfg)
	default:
		return usagef("--%s: %q is not one of %s, %s, %s", flagSink, s, sinkKafka, sinkNATS, sinkRabbitMQ)
	}
	return nil
}

// sinkSecurity reads the TLS and credentials flags of a nats or rabbitmq
// sink into cfg.SinkTLS. The credentials file is checked for being
// readable, never read: its content is the NATS client's alone.
func sinkSecurity(c *cli.Context, cfg *relay.Config) error {
	var err error
	if cfg.SinkTLS.Config, err = kafkaflags.ReadTLS(c, sinkTLS); err != nil {
		return err
	}
	creds := c.String(flagSinkCredsFile)
	if creds == "" {
		return nil
	}
	if cfg.Sink != sinkNATS {
		return usagef("--%s is a NATS credentials file, for --%s %s only", flagSinkCredsFile, flagSink, sinkNATS)
	}
	f, err := os.Open(creds)
	if err != nil {
		return usagef("--%s: %v", flagSinkCredsFile, err)
	}
	_ = f.Close()
	cfg.SinkTLS.CredentialsFile = creds
	return nil
}

// addSinkURL teaches sc the secrets of a sink URL (several, comma
// separated, for NATS): each one's password, or its user when it has no
// password (a NATS token: nats://token@host).
func addSinkURL(sc *scrubber, urls string) {
	for _, one := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			sc.add(pw)
		} else {
			sc.add(u.User.Username())
		}
	}
}
