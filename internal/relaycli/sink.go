package relaycli

import (
	"net/url"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pgoutbox/pgoutbox/internal/cliutil"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// The flags that choose the broker of relay run.
const (
	flagSink    = "sink"
	flagSinkURL = "sink-url"

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
	}
}

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
	case sinkNATS, sinkRabbitMQ:
		if secret.Value == "" {
			return usagef("--%s %s needs --%s (or %s)", flagSink, s, flagSinkURL, envVar(flagSinkURL)[0])
		}
		cfg.Sink, cfg.SinkURL = s, secret.Value
	default:
		return usagef("--%s: %q is not one of %s, %s, %s", flagSink, s, sinkKafka, sinkNATS, sinkRabbitMQ)
	}
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
